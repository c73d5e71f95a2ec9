"""The playground page in headless Chromium (Debian's ``chromium``, which ``make test`` installs):
it loads, lists the generators, a request round-trips through the real server and shows the same
tactics as /generate with their scores and steps remaining; a screenshot is saved under
``build/test-artifacts/``. Without Chromium the test fails and says so, unless
``LEANLOOP_SKIP_BROWSER=1``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from leanloop.serve import ServeConfig, create_app
from tests.serve_support import build_progress_model, live_server
from tests.tiny_causal import shared_tiny_model

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "build" / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
GOAL = "a b : ℕ\n⊢ a + b = b + a"


@pytest.fixture(scope="module")
def chromium() -> Path:
    found = CHROMIUM if CHROMIUM.is_file() else None
    if found is None and shutil.which("chromium"):
        found = Path(shutil.which("chromium"))
    if found is None:
        if os.environ.get("LEANLOOP_SKIP_BROWSER") == "1":
            pytest.skip("Chromium is not installed and LEANLOOP_SKIP_BROWSER=1")
        pytest.fail(
            "Chromium is not installed (/usr/bin/chromium): run scripts/ensure-chromium.sh "
            "(make test does), or set LEANLOOP_SKIP_BROWSER=1 to skip the browser test"
        )
    return found


@pytest.fixture(scope="module")
def url(sample_dir, tiny_encoder, tmp_path_factory):
    progress = build_progress_model(tmp_path_factory.mktemp("page") / "progress", tiny_encoder)
    config = ServeConfig.from_dict(
        {
            "models": [
                {
                    "name": "tiny",
                    "provider": "hf",
                    "model": str(shared_tiny_model(sample_dir)),
                    "decoding": {"max_new_tokens": 10},
                },
                {"name": "retriever", "provider": "encoder", "model": str(tiny_encoder)},
            ],
            "progress_model": str(progress),
        }
    )
    with live_server(create_app(config)) as base:
        yield base


def test_the_playground_round_trips_a_request(chromium, url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(url + "/")
            assert page.title() == "leanloop playground"
            page.wait_for_selector("#model option[value='tiny']", state="attached")
            # only the generators are offered
            options = page.locator("#model option").all_inner_texts()
            assert options == ["tiny (hf)"]
            assert page.is_enabled("#reward")  # a progress model is configured
            page.fill("#goal", GOAL)
            page.fill("#count", "5")
            page.check("#reward")
            page.click("#suggest")
            page.wait_for_selector("#results tbody tr")
            page.wait_for_function("document.getElementById('suggest').disabled === false")
            rows = [
                [cell.inner_text() for cell in row.locator("td").all()]
                for row in page.locator("#results tbody tr").all()
            ]
            status = page.inner_text("#status")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            screenshot = ARTIFACTS / "playground.png"
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    expected = httpx.post(
        f"{url}/generate",
        json={"name": "tiny", "input": GOAL, "num_samples": 5, "use_reward": True},
        timeout=60,
    ).json()["outputs"]
    assert [row[1] for row in rows] == [o["output"] for o in expected]
    assert [row[0] for row in rows] == [str(i + 1) for i in range(len(rows))]
    for row, output in zip(rows, expected, strict=True):
        assert float(row[2]) == pytest.approx(output["score"], rel=1e-3)
        assert float(row[3]) == pytest.approx(output["steps_remaining"], abs=0.01)
    assert status.startswith(f"{len(rows)} tactic")
    assert screenshot.stat().st_size > 10_000
