"""ExternalProver against a local HTTP server speaking the OpenAI chat-completions wire format:
replies ranked by their log-probabilities (or their order), failed tactics shown on a retry,
whole proofs, and slow, failing and malformed answers ending the theorem as 'error'; the API key
is sent but never shown."""

from __future__ import annotations

import json
import pickle
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from leanloop.data.records import AttemptStatus
from leanloop.errors import LeanloopError
from leanloop.lean.server import TheoremSource
from leanloop.prover.external import ExternalProver
from leanloop.prover.recorded import RecordedGenerator
from leanloop.prover.replay import ReplayServer
from leanloop.prover.whole import WHOLE_PROOF_SYSTEM_PROMPT
from tests.helpers import sample_theorems
from tests.test_search_repl import Accounted, Audited, Judged, Recorded, script

KEY = "sk-leanloop-test-4f1c9"


class Endpoint:
    """What the local server does (``behaviour``) and what it received."""

    def __init__(self, recorded: RecordedGenerator, proofs: dict[str, str]) -> None:
        self.recorded = recorded
        self.proofs = proofs  # whole proofs by the statement shown
        self.behaviour = "ok"
        self.script: dict[str, list[str]] = {}
        self.requests: list[dict] = []
        self.headers: list[dict] = []

    def answer(self, body: dict) -> tuple[int, bytes]:
        self.requests.append(body)
        if self.behaviour == "fail":
            return 503, b'{"error": {"message": "overloaded"}}'
        if self.behaviour == "slow":
            time.sleep(1.5)
        if self.behaviour == "not json":
            return 200, b"<html>gateway</html>"
        if self.behaviour == "no choices":
            return 200, json.dumps({"id": "x", "object": "chat.completion"}).encode()
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        state, _, feedback = user.partition("\n\nThese tactics failed on this state:\n")
        if self.behaviour == "script":  # only what the REPL's recording answers
            replies = [(t, -0.5) for t in self.script.get(state, [])]
        elif system == WHOLE_PROOF_SYSTEM_PROMPT:
            replies = [("nlinarith", -3.0), (f"```lean\n{self.proofs[state]}\n```", -1.0)]
        else:
            recorded = self.recorded.recorded(state)
            if self.behaviour == "feedback" and not feedback:
                recorded = []
            # junk first, the recorded tactics last but with the best log-probabilities
            replies = [("Try `simp`.", -5.0), ("norm_num", -4.0)]
            replies += [(f"```lean\n{t}\n```", -0.5 - i) for i, t in enumerate(recorded)]
        replies = replies[: body["n"]]
        choices = []
        for index, (content, logprob) in enumerate(replies):
            choice = {
                "index": index,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
            if body.get("logprobs") and self.behaviour != "no logprobs":
                tokens = [{"token": "t", "logprob": logprob / 2, "bytes": None, "top_logprobs": []}]
                choice["logprobs"] = {"content": tokens * 2, "refusal": None}
            choices.append(choice)
        response = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": choices,
        }
        return 200, json.dumps(response).encode()


@pytest.fixture(scope="module")
def traced(sample_dir):
    return [t for t in sample_theorems(sample_dir) if t.traced_tactics]


@pytest.fixture(scope="module")
def endpoint(traced):
    proofs = {
        t.traced_tactics[0].state_before: "\n".join(s.tactic for s in t.traced_tactics)
        for t in traced
    }
    state = Endpoint(RecordedGenerator(traced), proofs)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.headers.append({"authorization": self.headers.get("Authorization")})
            status, payload = state.answer(body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("LEANLOOP_TEST_KEY", KEY)
    return "LEANLOOP_TEST_KEY"


@pytest.fixture(autouse=True)
def fresh(endpoint):
    endpoint.behaviour = "ok"
    endpoint.requests.clear()
    endpoint.headers.clear()


def external(endpoint, key, **options) -> ExternalProver:
    config = {"num_sampled_tactics": 4, **options.pop("config", {})}
    options.setdefault("timeout", 5.0)
    options.setdefault("max_retries", 0)
    return ExternalProver("test-model", endpoint.url, key, config=config, **options)


def test_replies_ranked_by_log_probability_find_the_recorded_proofs(endpoint, key, traced):
    prover = external(endpoint, key)
    server = ReplayServer(traced)
    for theorem in traced[:5]:
        result = prover.search(server, theorem=theorem)
        assert result.status is AttemptStatus.REPLAYED and result.model_seconds > 0
    request = endpoint.requests[0]
    assert request["n"] == 4 and request["logprobs"] is True and request["model"] == "test-model"
    assert request["messages"][-1]["content"] == traced[0].traced_tactics[0].state_before
    assert endpoint.headers[0]["authorization"] == f"Bearer {KEY}"
    # the recorded tactic had the best log-probability, though it came last
    first = traced[0].traced_tactics[0]
    (ranked,) = prover.generator.generate_batch([first.state_before], 4)
    assert ranked[0].tactic == first.tactic and ranked[0].score == -0.5
    assert [g.tactic for g in ranked[1:]] == ["norm_num", "Try `simp`."]


def test_against_the_repl_s_recorded_answers(endpoint, key, transcripts):
    transcript = transcripts["proof_branching2"]
    endpoint.behaviour, endpoint.script = "script", script(transcript)
    prover = external(endpoint, key)
    source = TheoremSource("swap", "Swap.lean", "", "(p q : Prop) : p ∧ q → q ∧ p")
    result = prover.search(Judged(Recorded(transcript)), theorem=source)
    assert result.status is AttemptStatus.PROVED  # the REPL answered 'Completed'
    assert list(result.proof) == [r["tactic"] for r in transcript["requests"] if "tactic" in r]
    # a whole proof, accepted by the REPL's recorded verdict
    endpoint.script = {"example : True := by": ['```lean\ntrace "!"\ntrivial\n```']}
    whole = prover.prove_whole(Accounted(Audited(transcripts["trace_simp"])), goal="True")
    assert whole.status is AttemptStatus.PROVED and whole.proof == ('trace "!"\ntrivial',)


def test_without_log_probabilities_the_order_given_ranks(endpoint, key, traced):
    endpoint.behaviour = "no logprobs"
    prover = external(endpoint, key, logprobs=False)
    first = traced[0].traced_tactics[0]
    (ranked,) = prover.generator.generate_batch([first.state_before], 4)
    assert [g.tactic for g in ranked] == ["Try `simp`.", "norm_num", first.tactic]
    assert [g.score for g in ranked] == [0.0, -1.0, -2.0]
    assert "logprobs" not in endpoint.requests[0]
    assert prover.search(ReplayServer(traced), theorem=traced[0]).status is AttemptStatus.REPLAYED


def test_failed_tactics_and_lean_s_errors_go_into_the_retry(endpoint, key, traced):
    endpoint.behaviour = "feedback"
    prover = external(endpoint, key, config={"feedback_retries": 1})
    result = prover.search(ReplayServer(traced), theorem=traced[2])
    assert result.status is AttemptStatus.REPLAYED and result.expansions == 2
    retry = endpoint.requests[1]["messages"][-1]["content"]
    assert "These tactics failed on this state:\n- norm_num\n  Lean: not a recorded step" in retry
    assert "\n- Try `simp`.\n  Lean: not a recorded step" in retry
    no_retry = external(endpoint, key).search(ReplayServer(traced), theorem=traced[2])
    assert no_retry.status is AttemptStatus.FAILED


def test_whole_proofs_are_checked_before_they_are_reported(endpoint, key, traced):
    prover = external(endpoint, key, config={"num_whole_proofs": 2})
    theorem = traced[0]
    candidates = prover.generate_whole_proofs(theorem)
    assert candidates == ["dsimp [invFunIdAssoc]\naesop_cat", "nlinarith"]
    result = prover.prove_whole(ReplayServer(traced), theorem=theorem)
    assert result.status is AttemptStatus.REPLAYED
    assert result.proof == ("dsimp [invFunIdAssoc]", "aesop_cat")
    assert endpoint.requests[-1]["messages"][0]["content"] == WHOLE_PROOF_SYSTEM_PROMPT


@pytest.mark.parametrize(
    ("behaviour", "message", "retries", "requests"),
    [
        ("fail", "InternalServerError", 1, 2),  # retried once, then the theorem fails
        ("slow", "APITimeoutError", 0, 1),
        ("not json", "answer is not a chat completion", 0, 1),
        ("no choices", "no list of choices", 0, 1),
    ],
)
def test_bad_answers_end_the_theorem_as_error(
    endpoint, key, traced, behaviour, message, retries, requests
):
    endpoint.behaviour = behaviour
    prover = external(endpoint, key, timeout=0.5, max_retries=retries)
    started = time.perf_counter()
    result = prover.search(ReplayServer(traced), theorem=traced[0])
    assert result.status is AttemptStatus.ERROR and result.proof is None
    assert result.error.startswith("the tactic generator failed: ") and message in result.error
    assert len(endpoint.requests) == requests
    assert time.perf_counter() - started < 10
    assert KEY not in result.error
    endpoint.behaviour = "ok"  # the next theorem is fine
    assert prover.search(ReplayServer(traced), theorem=traced[1]).status is AttemptStatus.REPLAYED


def test_the_key_is_checked_at_construction_and_never_kept(endpoint, key, monkeypatch):
    prover = external(endpoint, key)
    assert KEY not in repr(vars(prover)) and KEY.encode() not in pickle.dumps(prover)
    monkeypatch.delenv("LEANLOOP_TEST_KEY")
    with pytest.raises(LeanloopError, match=r"\$LEANLOOP_TEST_KEY is not set") as error:
        external(endpoint, "LEANLOOP_TEST_KEY")
    assert "api_key_env=None" in str(error.value)
    keyless = external(endpoint, None)
    keyless.generator.generate_batch(["⊢ True"], 2)
    assert endpoint.headers[-1]["authorization"] != f"Bearer {KEY}"
    with pytest.raises(LeanloopError, match="timeout"):
        external(endpoint, None, timeout=0)


def test_a_hub_model_is_asked_at_hugging_face_s_router_with_hf_token(endpoint, traced, monkeypatch):
    """LeanDojo-v2's default provider: a hub name without base_url goes to Hugging Face's router,
    with HF_TOKEN (read through Settings) as its key; an explicit endpoint keeps OPENAI_API_KEY."""
    from leanloop.prover import external as module
    from leanloop.settings import Settings

    model = "deepseek-ai/DeepSeek-Prover-V2-671B:novita"
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(LeanloopError, match=r"\$HF_TOKEN is not set"):
        ExternalProver(model)
    monkeypatch.setenv("HF_TOKEN", "hf_leanloop_test")
    assert Settings.from_env().hf_token == "hf_leanloop_test"
    real = ExternalProver(model)
    assert (real.base_url, real.api_key_env) == (module.HF_ROUTER_URL, "HF_TOKEN")
    assert module.resolve_endpoint("gpt-4o-mini", None, "auto") == (None, "OPENAI_API_KEY")
    assert module.resolve_endpoint(model, endpoint.url, "auto") == (endpoint.url, "OPENAI_API_KEY")

    # the router stood in for by the local endpoint: the request carries HF_TOKEN's value
    monkeypatch.setattr(module, "HF_ROUTER_URL", endpoint.url)
    prover = ExternalProver(model, timeout=5.0, max_retries=0, config={"num_sampled_tactics": 4})
    assert prover.base_url == endpoint.url and prover.api_key_env == "HF_TOKEN"
    result = prover.search(ReplayServer(traced), theorem=traced[0])
    assert result.status is AttemptStatus.REPLAYED
    assert endpoint.headers[0]["authorization"] == "Bearer hf_leanloop_test"
    assert endpoint.requests[0]["model"] == model
    assert "hf_leanloop_test" not in repr(vars(prover))
