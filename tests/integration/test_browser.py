"""A real browser against a real `ckkb serve`: Playwright driving Debian's Chromium.

Starts `ckkb serve` as a subprocess on a free port over the knowledge base built from the default
tree, asks the why_missing canned query for a gfx950 tile from a `_part2` list, checks the
evidence row (the .cpp gate line), opens that instance's explain page and checks its per-arch
table. Screenshots go to tests/artifacts/ (gitignored; CI keeps them as artifacts).

Chromium missing is a failure, not a skip: `.ci/run` installs it (`apt-get install chromium`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CKKB_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
PART2 = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances_part2"
GATE_CPP = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_default_instance.cpp"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser_kb(request) -> Path:
    base = os.environ.get("CKKB_WEB_TEST_BASE_DB")  # shortcut while iterating; CI builds it
    return Path(base) if base else request.getfixturevalue("wheel_db")


@pytest.fixture(scope="module")
def server(browser_kb, tmp_path_factory):
    """`ckkb serve` in a subprocess; yields its base URL; stopped (by pid) afterwards."""
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = dict(os.environ, CKKB_CK_REPO_URL="")
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ckkb", "serve", "--db", str(browser_kb), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"ckkb serve exited with {proc.returncode}: {log.read_text()}")
            try:
                if httpx.get(base + "/-/ckkb", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"ckkb serve did not answer on {base} within 60 s: {log.read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def page():
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install it with `apt-get install -y chromium` (.ci/run does)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is not installed: `pip install -e .[test]`")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        pg = browser.new_page(viewport={"width": 1800, "height": 1100})
        yield pg
        browser.close()


def _screenshot_rows(page, must_contain: list[str], path: Path) -> None:
    """Screenshot the results table with only the rows containing every string, at a width
    that shows all its columns (then put the page back as it was)."""
    table = page.locator("table.rows-and-columns")
    width = table.evaluate("t => t.scrollWidth")
    before = page.viewport_size
    page.set_viewport_size({"width": min(width + 60, 5000), "height": before["height"]})
    hidden = table.evaluate(
        """(t, needles) => { let n = 0; t.querySelectorAll('tbody tr').forEach(tr => {
               if (!needles.every(s => tr.innerText.includes(s))) { tr.style.display = 'none'; n++; } }); return n; }""",
        must_contain,
    )
    assert hidden < table.locator("tbody tr").count()
    table.screenshot(path=str(path))
    table.evaluate("t => t.querySelectorAll('tbody tr').forEach(tr => { tr.style.display = ''; })")
    page.set_viewport_size(before)


def test_why_missing_then_explain(server, page):
    # 1. the canned query form, filled in the way a person would
    page.goto(f"{server}/ckkb/why_missing")
    page.fill('input[name="tile"]', "256x224x64")
    page.fill('input[name="arch"]', "gfx950")
    page.click('input[type="submit"]')
    page.wait_for_load_state()
    assert "tile=256x224x64" in page.url and "arch=gfx950" in page.url
    rows = page.locator("table.rows-and-columns tbody tr", has_text=PART2).filter(has_text=GATE_CPP)
    assert rows.count() >= 1
    evidence = rows.first
    text = evidence.inner_text()
    assert "registration" in text
    assert 'if(ck::get_device_name() != "gfx950")' in text
    assert evidence.locator("td.col-evidence_line").inner_text().strip() == "20"
    assert evidence.locator("td.col-evidence_file").inner_text().strip().endswith(GATE_CPP)
    assert (
        evidence.locator("td.col-evidence_file span")
        .get_attribute("title")
        .endswith("/" + GATE_CPP)
    )  # full path on hover
    page.screenshot(path=str(ARTIFACTS / "why_missing_gfx950.png"), full_page=False)
    _screenshot_rows(page, [PART2, GATE_CPP], ARTIFACTS / "why_missing_gfx950_evidence_row.png")

    # 2. the explain page, through the link in that row
    link = evidence.locator("td.col-instance_id a")
    instance_id = link.inner_text().strip()
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/-/ckkb/instance/{instance_id}")
    assert (
        page.locator("h1")
        .inner_text()
        .startswith(f"Instance {instance_id}: DeviceGemm_Xdl_CShuffleV3")
    )
    table = page.locator("table.ckkb-arch-table")
    assert table.is_visible()
    archs = [t.strip() for t in table.locator("tbody tr td:first-child").all_inner_texts()]
    assert {"gfx942", "gfx950"} <= set(archs)
    gfx950 = table.locator('tr[data-arch="gfx950"]')
    assert gfx950.locator("td").nth(1).inner_text().strip() == "no"
    assert gfx950.locator("td").nth(3).inner_text().strip() == "registration"
    assert gfx950.locator("td").nth(4).inner_text().strip() == f"{GATE_CPP}:20"
    gfx942 = table.locator('tr[data-arch="gfx942"]')
    assert gfx942.locator("td").nth(1).inner_text().strip() == "yes"
    page.screenshot(path=str(ARTIFACTS / "explain_instance.png"), full_page=True)


def test_bad_tile_page(server, page):
    page.goto(f"{server}/ckkb/why_missing?tile=256x224&arch=gfx950")
    assert page.locator(".ckkb-errors").inner_text().startswith("malformed tile '256x224'")
    page.screenshot(path=str(ARTIFACTS / "why_missing_bad_tile.png"))


def test_charts(server, page):
    page.goto(f"{server}/-/ckkb/chart/gate-census?arch=gfx950")
    assert page.locator("svg.ckkb-chart rect").count() > 20
    assert "87 exclude, 79 only" in page.locator("section.content").inner_text()
    page.screenshot(path=str(ARTIFACTS / "gate_census_gfx950.png"), full_page=True)
