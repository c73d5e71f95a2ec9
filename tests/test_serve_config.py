"""The server's configuration: every field read from YAML, the kind following from the provider,
one-line errors naming the file and the field, and the start-up errors of a server without a
usable configuration (uvicorn and ``leanloop serve``, in real processes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from leanloop.errors import DataFormatError
from leanloop.serve.config import ServeConfig
from tests.serve_support import lifespan_startup

REPO = Path(__file__).resolve().parents[1]

FULL = """\
models:
  - name: tiny
    provider: hf
    model: ./checkpoints/sft
    num_samples: 4
    decoding: {method: beam, num_beams: 8, max_new_tokens: 64, batch_size: 4}
  - name: retriever
    provider: encoder
    model: ./checkpoints/retriever
  - name: gpt
    provider: openai
    model: gpt-4o-mini
    base_url: http://localhost:8000/v1
    api_key_env: OPENAI_API_KEY
    timeout: 20
    retries: 3
    temperature: 0.9
    max_tokens: 96
    max_concurrency: 4
  - name: claude
    provider: anthropic
    model: claude-sonnet
    api_key_env: ANTHROPIC_API_KEY
  - name: gemini
    provider: gemini
    kind: generator
    model: gemini-flash
    api_key_env: GEMINI_API_KEY
    prompt_format: {system: "Reply with one Lean 4 tactic."}
progress_model: ./checkpoints/progress
lean:
  project: ./my-lean-project
  max_repls: 3
  max_uses: 50
  timeout: 120
  memory_limit_mb: 4096
host: 0.0.0.0
port: 8080
preload: true
max_queue: 16
max_queue_wait: 5
max_body_bytes: 65536
api_key_env: LEANLOOP_SERVER_KEY
cors_origins: ["http://localhost:5173"]
shutdown_timeout: 10
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_every_field_is_read(tmp_path):
    config = ServeConfig.load(write(tmp_path, FULL))
    assert [m.name for m in config.models] == ["tiny", "retriever", "gpt", "claude", "gemini"]
    assert [m.kind for m in config.models] == [
        "generator",
        "encoder",
        "generator",
        "generator",
        "generator",
    ]
    tiny, retriever, gpt, _, gemini = config.models
    assert tiny.local and retriever.local and not gpt.local
    assert tiny.decoding.num_beams == 8 and tiny.decoding.batch_size == 4
    assert (gpt.timeout, gpt.retries, gpt.max_concurrency) == (20, 3, 4)
    assert gpt.base_url == "http://localhost:8000/v1" and gpt.api_key_env == "OPENAI_API_KEY"
    assert gemini.prompt_format.system == "Reply with one Lean 4 tactic."
    assert config.lean.max_repls == 3 and config.lean.project == Path("./my-lean-project")
    assert (config.host, config.port, config.preload) == ("0.0.0.0", 8080, True)
    assert config.cors_origins == ["http://localhost:5173"]
    assert config.model("gpt") is gpt and config.model("nope") is None


def test_defaults(tmp_path):
    config = ServeConfig.load(write(tmp_path, "models: []\n"))
    assert (config.host, config.port) == ("127.0.0.1", 23337)
    assert config.api_key_env is None and config.cors_origins == [] and config.lean is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "models:\n  - {name: gpt, provider: openai, model: m, timeout: -1}\n",
            "field 'models[gpt].timeout': Input should be greater than 0",
        ),
        (
            "models:\n  - {name: gpt, provider: openai, model: m, tiemout: 3}\n",
            "field 'models[gpt].tiemout': unknown field (did you mean 'timeout'?)",
        ),
        (
            "models:\n  - {name: gpt, provider: openai}\n",
            "field 'models[gpt].model': the field is missing",
        ),
        (
            "models:\n  - {name: x, provider: mistral, model: m}\n",
            "field 'models[x].provider': Input should be 'hf', 'encoder', 'openai', 'anthropic'",
        ),
        (
            "models:\n  - {name: x, provider: encoder, kind: generator, model: m}\n",
            "field 'models[x]': provider 'encoder' gives kind 'encoder', not 'generator'",
        ),
        (
            "models:\n  - {name: a, provider: hf, model: m}\n"
            "  - {name: a, provider: hf, model: n}\n",
            "two models are named 'a'",
        ),
        (
            "models:\n  - {name: t, provider: hf, model: m, decoding: {method: top}}\n",
            "field 'models[t].decoding.method'",
        ),
        ("port: 99999\n", "field 'port': Input should be less than or equal to 65535"),
        ("- just\n- a list\n", "expected a mapping of field names to values"),
        ("models: [\n", "line 2"),
    ],
)
def test_errors_name_the_file_and_field(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(DataFormatError) as caught:
        ServeConfig.load(path)
    message = str(caught.value)
    assert message.startswith(str(path)), message
    assert expected in message
    assert "\n" not in message


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(DataFormatError, match="does not exist"):
        ServeConfig.load(tmp_path / "absent.yaml")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("LEANLOOP_SERVE_CONFIG", None)
    return env


def test_uvicorn_without_a_configuration_stops_with_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "uvicorn", "leanloop.serve:app", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert result.returncode != 0
    assert "error: no server configuration: LEANLOOP_SERVE_CONFIG is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_leanloop_serve_reports_a_bad_file(tmp_path):
    path = write(tmp_path, "models:\n  - {name: gpt, provider: openai, model: m, retries: 99}\n")
    result = subprocess.run(
        [sys.executable, "-m", "leanloop", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert result.returncode == 1
    assert f"{path}, line 2, field 'models[gpt].retries'" in result.stderr
    assert "Traceback" not in result.stderr


def test_importing_the_app_reads_nothing(tmp_path, monkeypatch):
    """``leanloop.serve:app`` is built on import without reading the configuration (a file that
    does not exist is only reported when the server starts)."""

    import leanloop.serve as serve

    monkeypatch.setenv("LEANLOOP_SERVE_CONFIG", str(tmp_path / "absent.yaml"))
    app = serve.create_app()
    assert app.state is None
    sent = lifespan_startup(app)
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert "absent.yaml: the configuration file does not exist" in sent[0]["message"]


def test_uvicorn_serves_the_configuration_named_by_the_environment(tmp_path):
    import httpx

    from tests.serve_support import wait_until

    path = write(tmp_path, "models:\n  - {name: gpt, provider: openai, model: m}\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**_env(), "LEANLOOP_SERVE_CONFIG": str(path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "leanloop.serve:app", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"

    def models():
        try:
            return httpx.get(f"{url}/models").json()["models"]
        except httpx.TransportError:
            return None

    try:
        wait_until(lambda: models() is not None, timeout=60)
        assert [(m["name"], m["provider"], m["loaded"]) for m in models()] == [
            ("gpt", "openai", False)
        ]
    finally:
        process.terminate()
        process.wait(timeout=30)
