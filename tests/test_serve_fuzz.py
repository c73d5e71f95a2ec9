"""Property-based fuzzing of the published OpenAPI schema with schemathesis against the live
server (a tiny local generator, a tiny encoder and a progress model behind it): valid and invalid
requests of every operation, and not one answer is a server error. The Lean routes answer 503
here by design (this machine has no Lean), with their one-line reason."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from leanloop.serve import ServeConfig, create_app
from tests.serve_support import build_progress_model, live_server
from tests.tiny_causal import shared_tiny_model

LEAN_ROUTES = ("/verify", "/api/checks", "/api/check")
#: Requests per operation and kind (valid, invalid).
EXAMPLES = 40


@pytest.fixture(scope="module")
def base_url(sample_dir, tiny_encoder, tmp_path_factory):
    progress = build_progress_model(tmp_path_factory.mktemp("fuzz") / "progress", tiny_encoder)
    config = ServeConfig.from_dict(
        {
            "models": [
                {
                    "name": "tiny",
                    "provider": "hf",
                    "model": str(shared_tiny_model(sample_dir)),
                    "max_tokens": 4,
                    "decoding": {"max_new_tokens": 4, "max_prompt_tokens": 256},
                },
                {"name": "retriever", "provider": "encoder", "model": str(tiny_encoder)},
            ],
            "progress_model": str(progress),
        }
    )
    with live_server(create_app(config)) as url:
        yield url


@pytest.fixture(scope="module")
def api_schema(base_url):
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


def with_known_model(case, name):
    """Most generated requests name a configured model (random names only meet the 404)."""
    if name is not None and isinstance(case.body, dict):
        for field in ("name", "model"):
            if field in case.body:
                case.body[field] = name
    return case


def test_no_request_gets_a_server_error(api_schema, base_url):
    tried: Counter[tuple[str, int]] = Counter()
    names = st.sampled_from(["tiny", "tiny", "retriever", None])
    for result in api_schema.get_all_operations():
        operation = result.ok()
        modes = [GenerationMode.POSITIVE]
        if operation.method.upper() == "POST":  # a GET here takes no input to get wrong
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:
            cases = st.builds(with_known_model, operation.as_strategy(generation_mode=mode), names)

            @given(case=cases)
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def no_server_error(case):
                response = case.call(base_url=base_url, timeout=60)
                tried[case.operation.path, response.status_code] += 1
                if case.operation.path in LEAN_ROUTES and response.status_code == 503:
                    detail = response.json()["detail"]
                    assert detail.startswith("Lean verification is not configured")
                    return
                case.validate_response(response, checks=[not_a_server_error])

            no_server_error()
    # the models did run: each route answered some requests with success
    answered = {path for (path, status), _ in tried.items() if status == 200}
    assert {"/generate", "/encode", "/v1/chat/completions", "/v1/completions", "/models"} <= (
        answered
    ), tried
    assert any(status == 422 for _, status in tried), tried
