"""Lean verification in Kimina Lean Server's shape (/verify, /api/checks, /api/check): Lean's
answers read by ``ReplServer`` from the REPL's real recorded transcripts and given back as Lean
gave them, the verdicts, timeouts, the response shape of Kimina's real recorded verdicts, and —
for real on this machine, which has no Lean — the 503 that says what is missing."""

from __future__ import annotations

import json

import httpx
import pytest

from leanloop.lean.errors import RequestTimeout
from leanloop.lean.repl import ReplServer
from leanloop.lean.transcript import TranscriptTransport
from leanloop.lean.transport import Transport
from leanloop.serve import ServeConfig, create_app
from leanloop.serve.kimina import VerifyResponse
from tests.serve_support import live_server

#: Transcripts whose first command is a whole piece of code (with its recorded answer).
PLAIN = ("tactic_sorry", "unfinished_tactic_block", "def_eval", "self_proof_exact_check")


class TimedReplay(Transport):
    """A recorded REPL behind a transport with a per-command time limit: records the limit in
    force at each exchange (``ProcessTransport`` reads its ``timeout`` the same way)."""

    def __init__(self, exchanges, timeout: float = 300.0) -> None:
        self.replay = TranscriptTransport(exchanges, ordered=False)
        self.timeout = timeout
        self.seen: list[float] = []
        self.generation = 1

    def exchange(self, request):
        self.seen.append(self.timeout)
        return self.replay.exchange(request)


class TimingOut(Transport):
    generation = 1

    def exchange(self, request):
        raise RequestTimeout("the Lean REPL did not answer within 5 s")


@pytest.fixture(scope="module")
def recorded(transcripts):
    exchanges = [(transcripts[n]["requests"][0], transcripts[n]["responses"][0]) for n in PLAIN]
    mathlib = transcripts["Mathlib/test/exact"]
    exchanges += list(zip(mathlib["requests"][:2], mathlib["responses"][:2], strict=True))
    tree = transcripts["infotree_theorem"]
    exchanges.append((tree["requests"][0], tree["responses"][0]))
    return exchanges


@pytest.fixture(scope="module")
def served(recorded):
    transports: list[TimedReplay] = []

    def factory(key):
        if key == "import Slow":
            return ReplServer(TimingOut())
        transports.append(TimedReplay(recorded))
        return ReplServer(transports[-1])

    # one check per REPL: each gets a fresh recording
    config = ServeConfig.from_dict(
        {"lean": {"project": "/nonexistent", "max_repls": 2, "max_uses": 1}}
    )
    with live_server(create_app(config, verifier_factory=factory)) as url:
        yield url, transports


def post(url: str, path: str, body) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=60)


def test_verify_gives_lean_answers_as_recorded(served, transcripts):
    url, _ = served
    codes = [
        {"custom_id": name, "proof": transcripts[name]["requests"][0]["cmd"]} for name in PLAIN
    ]
    answer = post(url, "/verify", {"codes": codes})
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert [r["custom_id"] for r in results] == list(PLAIN)
    for name, result in zip(PLAIN, results, strict=True):
        lean = transcripts[name]["responses"][0]
        assert result["error"] is None
        response = result["response"]
        assert response["env"] == lean["env"]
        # Lean's messages come back exactly as Lean wrote them
        assert response.get("messages", []) == lean.get("messages", [])
        assert [s["goal"] for s in response.get("sorries", [])] == [
            s["goal"] for s in lean.get("sorries", [])
        ]
        for ours, theirs in zip(response.get("sorries", []), lean.get("sorries", []), strict=True):
            assert ours["pos"] == theirs["pos"] and ours["proofState"] == theirs["proofState"]
        assert response["time"] >= 0
    assert [r["verdict"] for r in results] == [
        "contains_sorry",
        "rejected",
        "accepted",
        "rejected",
    ]


def test_positions_refer_to_the_code_as_sent(served, transcripts):
    """The imports are elaborated once; Lean's positions in the body are moved to the code."""
    url, _ = served
    code = "import Mathlib\n\ntheorem test : 0 < 1 := by sorry"
    answer = post(url, "/verify", {"codes": [{"custom_id": 7, "code": code}]})
    (result,) = answer.json()["results"]
    assert result["custom_id"] == "7"
    lean = transcripts["Mathlib/test/exact"]["responses"][1]
    (message,) = result["response"]["messages"]
    assert message["data"] == lean["messages"][0]["data"]
    assert message["pos"] == {"line": lean["messages"][0]["pos"]["line"] + 2, "column": 8}
    assert result["response"]["sorries"][0]["goal"] == "⊢ 0 < 1"
    assert result["verdict"] == "contains_sorry"


def test_the_time_limit_is_the_requests_within_the_servers(served, transcripts):
    url, transports = served
    code = transcripts["def_eval"]["requests"][0]["cmd"]
    post(url, "/verify", {"codes": [{"custom_id": "a", "proof": code}], "timeout": 7})
    post(url, "/verify", {"codes": [{"custom_id": "b", "proof": code}], "timeout": 9000})
    seen = [limit for transport in transports for limit in transport.seen]
    assert 7 in seen and 300 in seen  # 9000 s is capped by lean.timeout (300)
    assert all(t.timeout == 300.0 for t in transports)  # restored after each check
    # the imports are elaborated under the server's limit, only the body under the request's
    transports.clear()
    code = "import Mathlib\n\ntheorem test : 0 < 1 := by sorry"
    post(url, "/verify", {"codes": [{"custom_id": 7, "code": code}], "timeout": 7})
    (transport,) = transports
    assert transport.seen == [300.0, 7]


def test_a_timeout_is_a_result_not_an_http_error(served):
    url, _ = served
    answer = post(
        url, "/verify", {"codes": [{"custom_id": "s", "proof": "import Slow\n\n#eval 1"}]}
    )
    assert answer.status_code == 200
    (result,) = answer.json()["results"]
    assert result["error"] == "the Lean REPL did not answer within 5 s"
    assert result["response"] is None and "verdict" not in result


def test_api_checks_and_check(served, transcripts):
    url, _ = served
    snippets = [{"id": n, "code": transcripts[n]["requests"][0]["cmd"]} for n in PLAIN[:2]]
    answer = post(url, "/api/checks", {"snippets": snippets})
    assert answer.status_code == 200
    results = answer.json()
    assert [r["id"] for r in results] == list(PLAIN[:2])
    assert all(r["error"] is None and r["time"] >= 0 for r in results)
    assert "time" not in results[0]["response"]
    assert [r["verdict"] for r in results] == ["contains_sorry", "rejected"]
    one = post(url, "/api/check", {"snippet": snippets[1]}).json()
    assert (
        one["id"] == PLAIN[1] and one["response"]["messages"][0]["data"] == "unsolved goals\n⊢ Nat"
    )
    duplicate = post(url, "/api/checks", {"snippets": [snippets[0], snippets[0]]})
    assert duplicate.status_code == 422 and "unique" in duplicate.text
    assert post(url, "/api/checks", {"snippets": []}).status_code == 422


def test_an_infotree_asked_for_comes_back_as_the_repl_gave_it(served, transcripts):
    url, _ = served
    recorded = transcripts["infotree_theorem"]
    code = recorded["requests"][0]["cmd"]
    answer = post(
        url, "/verify", {"codes": [{"custom_id": "t", "proof": code}], "infotree_type": "full"}
    )
    (result,) = answer.json()["results"]
    assert result["response"]["infotree"] == recorded["responses"][0]["infotree"]
    assert result["verdict"] == "accepted" and result["axioms_audited"] is False


def test_unsupported_options_are_refused(served):
    url, _ = served
    answer = post(
        url,
        "/verify",
        {"codes": [{"custom_id": "x", "proof": "#eval 1"}], "infotree_type": "synthetic"},
    )
    assert answer.status_code == 422 and "infotree_type" in answer.text
    assert post(url, "/verify", {"codes": []}).status_code == 422
    no_code = post(url, "/verify", {"codes": [{"custom_id": "x"}]})
    assert no_code.status_code == 422 and "give the Lean code as 'proof'" in no_code.text


def test_the_response_has_kiminas_shape(fixtures):
    """Kimina's real recorded verdicts read and write back unchanged with the response model,
    which adds one field of leanloop's to each result: that no axioms were audited."""
    path = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(rows) == 78
    for row in rows:
        parsed = VerifyResponse.model_validate(row["result"])
        written = parsed.model_dump(mode="json", by_alias=True)
        assert all(r.pop("axioms_audited") is False for r in written["results"])
        assert written == row["result"], row["name"]


def test_without_lean_verify_is_a_503_that_says_what_is_missing(tmp_path, monkeypatch):
    """This machine has no Lean toolchain: the real check finds none and says so in one line."""
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    project = tmp_path / "project"
    project.mkdir()
    (project / "lakefile.lean").write_text("import Lake\nopen Lake DSL\npackage demo\n")
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")
    with_project = ServeConfig.from_dict({"lean": {"project": str(project)}})
    with live_server(create_app(with_project)) as url:
        answer = post(url, "/verify", {"codes": [{"custom_id": "a", "proof": "#eval 1"}]})
        check = post(url, "/api/check", {"snippet": {"id": "a", "code": "#eval 1"}})
    assert answer.status_code == 503 and check.status_code == 503
    detail = answer.json()["detail"]
    assert detail.startswith("Lean verification is unavailable: no Lean toolchain: elan")
    assert "'leanloop doctor' shows what is missing" in detail and "\n" not in detail
    with live_server(create_app(ServeConfig())) as url:
        answer = post(url, "/verify", {"codes": [{"custom_id": "a", "proof": "#eval 1"}]})
    assert answer.status_code == 503
    assert answer.json()["detail"].startswith("Lean verification is not configured")
