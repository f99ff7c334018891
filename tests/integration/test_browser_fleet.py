"""The fleet_spread page in a real browser: its chart is on the page, and the slow GPU leads it.

A small knowledge base (the ck_mini fixture tree) with a fleet harness bundle of three GPUs, one
slow (tests/fleet_bundles.py), served by `ckkb serve`; Chromium through Playwright."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from ckkb import sources
from ckkb.extract.profiler import STAGE
from ckkb.kb.build import build
from ckkb.kb.ingest import ingest
from tests.fleet_bundles import harness_fleet_bundle
from tests.integration.test_browser import ARTIFACTS, _free_port, page  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def fleet_server(tmp_path_factory):
    from pathlib import Path

    d = tmp_path_factory.mktemp("fleet_web")
    kb = d / "ckkb.db"
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    build(kb, {"ck": sources.ck_tree(fixtures / "ck_mini")}, stages=[STAGE], jobs=1)
    ingest(kb, [harness_fleet_bundle(d / "fleet.jsonl")])
    port = _free_port()
    log = open(d / "serve.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb", "serve", "--db", str(kb), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (d / "serve.log").read_text()
            try:
                if httpx.get(base + "/-/ckkb", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "ckkb serve did not answer within 60 s"
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_fleet_spread_page_shows_its_chart(fleet_server, page):  # noqa: F811
    page.goto(f"{fleet_server}/ckkb/fleet_spread?arch=gfx942&slack=")
    chart = page.locator("#ckkb-fleet-chart svg")
    chart.wait_for(timeout=10_000)
    bars = chart.locator("rect")
    assert bars.count() == 3  # one bar per GPU of node7
    # the slow GPU leads, highlighted, with its two outlier rows
    assert "node7 g2: 2 of 2 rows outliers" in bars.first.locator("title").text_content()
    assert page.locator("table.rows-and-columns tbody tr").count() == 6
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "fleet_spread.png"), full_page=True)
