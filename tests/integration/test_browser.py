"""A real browser against a real `ckkb serve`: Playwright driving Debian's Chromium at 1440x900.

Starts `ckkb serve` as a subprocess on a free port over the knowledge base built from the default
tree with the shared ckProfiler samples ingested, then:
- asks why_missing through its form, checks the evidence row and the explain page it links to;
- opens every canned query with real parameters and checks, as a person would see it: the answer
  column inside the first screen, the summary line above the table, no decisive cell cut (each
  cell's text is the whole value the query's JSON has) and every link on the page answering 200;
- opens the chart of every race and checks that the highlighted bar is the winner the heading
  names.
Screenshots go to tests/artifacts/ (gitignored; CI keeps them as artifacts);
`CKKB_SCREENSHOTS=docs/screenshots` also writes the README's (landing page, why_missing, a race
chart) there.

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

from ckkb.kb.ingest import ingest
from ckkb.web.metadata import canned_queries
from tests.conftest import SAMPLES

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


VIEWPORT = {"width": 1440, "height": 900}
SCREENSHOTS = os.environ.get("CKKB_SCREENSHOTS")  # e.g. docs/screenshots: the README's


@pytest.fixture(scope="module")
def browser_kb(request, tmp_path_factory) -> Path:
    """The default tree's knowledge base with every shared ckProfiler sample ingested."""
    base = os.environ.get("CKKB_WEB_TEST_BASE_DB")  # shortcut while iterating; CI builds it
    base_db = Path(base) if base else request.getfixturevalue("wheel_db")
    path = tmp_path_factory.mktemp("browser") / "ckkb.db"
    shutil.copy(base_db, path)
    logs = sorted(SAMPLES.glob("*.txt"))
    assert ingest(path, logs).races_added == len(logs)
    return path


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
            f"Chromium not found at {CHROMIUM}: install it with `apt-get install -y chromium` "
            "(.ci/run does)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is not installed: `pip install -e .[test]`")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        pg = browser.new_page(viewport=VIEWPORT)
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
               if (!needles.every(s => tr.innerText.includes(s))) {
                 tr.style.display = 'none'; n++; } }); return n; }""",
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
    page.select_option('select[name="arch"]', "gfx950")  # a dropdown of the knowledge base's archs
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
    assert evidence.locator("td.col-available").inner_text().strip() == "no"
    page.screenshot(path=str(ARTIFACTS / "why_missing_gfx950.png"), full_page=False)
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / "why_missing.png"))
    _screenshot_rows(page, [PART2, GATE_CPP], ARTIFACTS / "why_missing_gfx950_evidence_row.png")

    # 2. the explain page, through the link in that row
    link = evidence.locator("td.col-instance_id a")
    instance_id = link.inner_text().strip()
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/-/ckkb/instance/{instance_id}")
    assert "256x224x64" in page.locator("h1").inner_text()
    assert page.locator("code.ckkb-printed-name").count() >= 1  # what ckProfiler prints
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
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
    page.goto(f"{server}/ckkb/why_missing?tile=256x240x64&arch=gfx950")  # no such tile
    empty = page.locator("p.ckkb-summary").inner_text()
    assert "No tile 256x240x64" in empty and "nearest: 256x256x64" in empty
    page.screenshot(path=str(ARTIFACTS / "why_missing_bad_tile.png"))


def test_charts(server, page):
    page.goto(f"{server}/-/ckkb/chart/gate-census?arch=gfx950")
    assert page.locator("svg.ckkb-chart rect").count() > 20
    assert "87 exclude, 79 only" in page.locator("section.content").inner_text()
    page.screenshot(path=str(ARTIFACTS / "gate_census_gfx950.png"), full_page=True)


# ---------------------------------------------------------------- every canned query at 1440x900

# Real parameters per canned query; a query not listed here (a new one) is asked with its
# parameters empty. Lookups read a value from the knowledge base itself.
PARAMS: dict[str, dict[str, str]] = {
    "why_missing": {"tile": "256x224x64", "arch": "gfx950"},
    "arch_diff": {"arch_a": "gfx942", "arch_b": "gfx950"},
    "pool": {"dir": "gemm_universal", "arch": "gfx950"},
    "pool_counts": {"dir": "gemm_universal", "dtype": "bhalf_t"},
    "gate_census": {"kind": "device_name", "arch": "gfx950"},
    # one CK tree here: its diff against itself (no rows) on the page
    "version_diff": {"from": "1.2.0", "to": "1.2.0", "dir": "gemm_universal", "arch": "gfx942"},
}
LOOKUPS = {
    "names_locate": ("key", f"select key from instance_keys where list_name = '{PART2}' limit 1"),
    "names_availability": (
        "registration_id",
        f"select id from registrations where list_name = '{PART2}' order by id limit 1",
    ),
}
_CHECKED: dict[str, int] = {}  # link -> status, shared by every page of the module


def _params(server: str, name: str) -> dict[str, str]:
    out = {p: "" for p in canned_queries()[name].params}
    out.update(PARAMS.get(name, {}))
    if name in LOOKUPS:
        param, sql = LOOKUPS[name]
        r = httpx.get(f"{server}/ckkb.json", params={"sql": sql, "_shape": "array"}, timeout=30)
        out[param] = str(next(iter(r.json()[0].values())))
    return out


def _inside_first_screen(box) -> bool:
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= VIEWPORT["width"]
        and box["y"] + box["height"] <= VIEWPORT["height"]
    )


def _links_answer(server: str, page) -> None:
    hrefs = page.eval_on_selector_all(
        "section.content a[href], header a[href]",
        "els => els.map(a => new URL(a.getAttribute('href'), location.href).href)"
        ".filter(h => h.startsWith(location.origin))",
    )
    with httpx.Client(timeout=30) as client:
        for href in dict.fromkeys(h.split("#")[0] for h in hrefs):
            if href not in _CHECKED:
                _CHECKED[href] = client.get(href).status_code
    bad = {h: s for h, s in _CHECKED.items() if s != 200 and h in hrefs}
    assert not bad, f"links that do not answer 200 on {page.url}: {bad}"


@pytest.mark.parametrize("name", sorted(canned_queries()))
def test_canned_query_page(server, page, name):
    from urllib.parse import urlencode

    params = _params(server, name)
    url = f"{server}/ckkb/{name}" + ("?" + urlencode(params) if params else "")
    page.goto(url)
    assert page.url.split("?")[0].endswith(f"/ckkb/{name}"), page.url  # not an error page
    summary = page.locator("p.ckkb-summary")
    assert summary.count() == 1 and summary.inner_text().strip()
    assert _inside_first_screen(summary.bounding_box())
    rows = httpx.get(
        f"{server}/ckkb/{name}.json", params={**params, "_shape": "array", "_size": "max"}
    ).json()
    table = page.locator("table.ckkb-shaped")
    if not rows:
        assert table.count() == 0 and summary.inner_text().startswith("No rows.")
    else:
        answer = page.locator("table.ckkb-shaped th.ckkb-answer")
        assert answer.count() == 1, "the answer column is marked"
        assert _inside_first_screen(answer.bounding_box()), "the answer column is on screen"
        first = page.locator("table.ckkb-shaped tbody tr").first.locator("td").first
        assert _inside_first_screen(first.bounding_box())
        # no decisive cell is cut: each text is a whole value of that column, and fits its cell
        cells = page.eval_on_selector_all(
            "table.ckkb-shaped td.ckkb-decisive",
            """tds => tds.map(td => ({col: [...td.classList].find(c => c.startsWith('col-')),
                 text: td.innerText.trim(), over: td.scrollWidth - td.clientWidth}))""",
        )
        assert cells
        for c in cells:
            col = c["col"][len("col-") :]
            values = {" ".join(str(r[col]).split()) for r in rows if r.get(col) is not None}
            if c["text"] in ("yes", "no", "") or not values:
                continue
            assert c["over"] <= 1, f"{name}: a {col} cell overflows its cell: {c}"
            c["text"] = " ".join(c["text"].split())
            if isinstance(next(r[col] for r in rows if r.get(col) is not None), str):
                assert c["text"] in values, f"{name}: {col} cell is not a whole value: {c}"
    page.screenshot(path=str(ARTIFACTS / f"query_{name}.png"))
    _links_answer(server, page)


def test_every_race_chart_highlights_its_winner(server, page):
    races = httpx.get(
        f"{server}/ckkb/race_spread.json", params={"race_id": "", "_shape": "array"}
    ).json()
    assert len(races) == len(list(SAMPLES.glob("*.txt")))
    for race in races:
        page.goto(f"{server}/-/ckkb/chart/race-spread?race={race['id']}")
        assert page.locator("h1").inner_text().startswith(f"Race spread — race {race['id']}")
        winner = page.locator("code.ckkb-winner-name")
        highlighted = page.locator("svg.ckkb-chart rect.ckkb-winner")
        if race["winner"]:
            assert winner.inner_text() == race["winner"]
            assert highlighted.count() == 1
            assert highlighted.get_attribute("data-name") == race["winner"]
            values = [
                float(v)
                for v in page.eval_on_selector_all(
                    "svg.ckkb-chart rect.ckkb-bar", "rs => rs.map(r => r.dataset.value)"
                )
            ]
            assert float(highlighted.get_attribute("data-value")) == pytest.approx(race["best"])
            assert race["best"] in (max(values), min(values))  # TFLOPS: highest; ms: lowest
        else:
            assert winner.count() == 0 and highlighted.count() == 0
        assert page.locator("svg.ckkb-chart text.ckkb-tick-label").count() >= 4  # axis ticks
        labels = page.eval_on_selector_all(
            "svg.ckkb-chart text.ckkb-label",
            "ts => ts.map(t => [t.dataset.name, t.lastChild.textContent.replace(/^\\d+\\. /, '')])",
        )
        by_label: dict[str, set[str]] = {}
        for full, label in labels:
            by_label.setdefault(label, set()).add(full)
        # bars of different names read differently (ckProfiler prints some names twice)
        assert all(len(names) == 1 for names in by_label.values()), by_label
        if race["id"] == 11:  # winner only in the Best line (sample 011)
            page.screenshot(path=str(ARTIFACTS / "race_11.png"), full_page=True)
            if SCREENSHOTS:
                page.screenshot(path=str(Path(SCREENSHOTS) / "race_chart.png"))
        _links_answer(server, page)


def test_landing_page_and_search(server, page):
    page.goto(f"{server}/")
    questions = page.locator("section.ckkb-question h2").all_inner_texts()
    assert [q.split(" ")[0] for q in questions] == ["Why", "What", "What", "Which"]
    for q in page.locator("section.ckkb-question").all():
        assert _inside_first_screen(q.locator("h2").bounding_box())
    arch = page.locator("section.ckkb-question").first.locator('select[name="arch"]')
    assert "gfx950" in arch.locator("option").all_inner_texts()  # filled from the database
    page.screenshot(path=str(ARTIFACTS / "landing.png"))
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / "landing.png"))
    _links_answer(server, page)
    page.fill('input[name="q"]', "256x224x64")
    page.click('form.ckkb-search input[type="submit"]')
    page.wait_for_load_state()
    said = page.locator("p.ckkb-summary").inner_text()
    assert "tiles" in said and "printed instance names" in said and "instances (" in said
    # 11 instances have this tile: `ckkb why --tile 256x224x64 --arch gfx950` lists 11 blocks
    assert page.locator("h2", has_text="tiles").inner_text().endswith("(11)")
    _links_answer(server, page)
