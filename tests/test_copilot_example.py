"""The Lean Copilot example file names every setup step of Lean Copilot's README, and the
generator it registers is the one the README's models.yaml serves, on the server's default
address. (The file is not compiled here: there is no Lean toolchain.)"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from leanloop.serve.config import ServeConfig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "copilot" / "LeanloopCopilot.lean"

# Lean Copilot's own setup (its README, "Adding Lean Copilot as a Dependency")
STEPS = (
    '"-L./.lake/packages/LeanCopilot/.lake/build/lib", "-lctranslate2"',
    'require LeanCopilot from git "https://github.com/lean-dojo/LeanCopilot.git" @',
    "lake update LeanCopilot",
    "lake exe LeanCopilot/download",
    "lake build",
    "Git LFS",
)


def test_the_example_and_the_readme_give_every_setup_step() -> None:
    example = EXAMPLE.read_text(encoding="utf-8")
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for step in STEPS:
        assert step in example, f"{EXAMPLE.name} does not say {step!r}"
        assert " ".join(step.split()) in readme, f"README.md does not say {step!r}"
    # the steps come in Lean Copilot's order
    positions = [example.index(step) for step in STEPS[:5]]
    assert positions == sorted(positions)


def test_the_registered_generator_is_served_on_the_default_port() -> None:
    example = EXAMPLE.read_text(encoding="utf-8")
    fields = dict(re.findall(r"^\s*(name|host|port) := \"?([\w.]+)\"?", example, re.MULTILINE))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    models_yaml = readme.split("<!-- readme: file models.yaml -->\n```yaml\n", 1)[1].split("```")[0]
    served = {entry["name"] for entry in yaml.safe_load(models_yaml)["models"]}
    assert fields["name"] in served
    assert fields["host"] in ("localhost", "127.0.0.1")
    assert int(fields["port"]) == ServeConfig.model_fields["port"].default
    assert 'registerGenerator "leanloop" (.external leanloopGenerator)' in example
    assert 'LeanCopilot.suggest_tactics.model "leanloop"' in example
