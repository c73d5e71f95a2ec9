"""ProverConfig: LeanDojo-v2's fields and defaults, a description on every field, YAML/JSON
files, and one-line errors naming the file and the field."""

from __future__ import annotations

import dataclasses

import pytest

from leanloop.errors import LeanloopError
from leanloop.prover.config import ProverConfig


def test_lean_dojo_v2_fields_work():
    config = ProverConfig(
        use_vllm=False,
        num_workers=4,
        timeout=600,
        max_expansions=None,
        num_sampled_tactics=64,
        debug=False,
        batch_size=12,
    )
    assert (config.timeout, config.num_sampled_tactics, config.batch_size) == (600, 64, 12)
    defaults = ProverConfig()
    assert defaults.timeout == 600 and defaults.num_sampled_tactics == 64
    assert defaults.max_expansions is None and defaults.strategy == "best_first"
    for field in dataclasses.fields(ProverConfig):
        assert field.default.description, field.name  # every field says what it does


def test_files_round_trip_and_errors_name_file_and_field(tmp_path):
    config = ProverConfig(timeout=30, max_expansions=50, strategy="depth_first")
    assert ProverConfig.from_yaml(config.to_yaml(tmp_path / "p.yaml")) == config
    assert ProverConfig.from_json(config.to_json(tmp_path / "p.json")) == config
    bad = tmp_path / "bad.yaml"
    bad.write_text("timeout: 0\n")
    with pytest.raises(LeanloopError, match=r"bad\.yaml, line 1, field 'timeout'"):
        ProverConfig.from_yaml(bad)
    bad.write_text("num_sample_tactics: 8\n")
    with pytest.raises(LeanloopError) as error:
        ProverConfig.from_yaml(bad)
    assert "field 'num_sample_tactics': unknown field" in str(error.value)
    assert "did you mean 'num_sampled_tactics'" in str(error.value)
    bad.write_text("strategy: random\n")
    with pytest.raises(LeanloopError, match="field 'strategy'"):
        ProverConfig.from_yaml(bad)


def test_lean_dojo_v2_s_file_of_both_configs(tmp_path):
    both = tmp_path / "configs.yaml"
    both.write_text(
        "training:\n  lr: 0.001\n  max_epochs: 1\n"
        "prover:\n  use_vllm: false\n  num_workers: 4\n  timeout: 600\n"
        "  max_expansions: null\n  num_sampled_tactics: 64\n  debug: false\n  batch_size: 12\n"
    )
    config = ProverConfig.from_yaml(both)
    assert config.num_workers == 4 and config.batch_size == 12


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"use_vllm": True}, "vllm serve"),
        ({"progress_model": "/models/progress"}, "progress_weight is 0"),
        ({"strategy": "depth_first", "batch_size": 4}, "batch_size must be 1"),
        ({"num_workers": 0}, "field 'num_workers'"),
        ({"progress_weight": -1}, "field 'progress_weight'"),
    ],
)
def test_values_that_do_not_fit_are_refused(fields, message):
    with pytest.raises(LeanloopError) as error:
        ProverConfig(**fields)
    assert message in str(error.value)
    assert "\n" not in error.value.message


def test_a_policy_other_than_the_standard_one_names_its_runs():
    from leanloop.prover.config import ProverConfig

    assert ProverConfig().policy_tag == ""
    assert ProverConfig(allow_native=True).policy_tag == "axioms=native"
    narrow = ProverConfig(allowed_axioms=("propext",))
    assert narrow.policy_tag == "axioms=propext"
    assert ProverConfig(allowed_axioms=()).policy_tag == "axioms=none"
    assert (
        ProverConfig(allowed_axioms=("Quot.sound", "propext", "Classical.choice")).policy_tag == ""
    )
    assert narrow.axiom_policy.allowed == {"propext"}
