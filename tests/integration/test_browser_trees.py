"""Two CK trees in a real browser: the tree dropdown of a canned query and the explain page's
availability across trees.

`ckkb serve` over the two-tree knowledge base of tests/two_trees.py (ck_mini as 1.2.0 and its
overlay ck_mini_next as 1.3.0), Chromium through Playwright. The expected answers are read off the
fixtures (tests/fixtures/ck_mini_next/README.md): part2's 256x224x64 is left out on gfx950 by a
`!= "gfx950"` registration gate in 1.2.0 and registered there in 1.3.0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.integration.test_browser import ARTIFACTS, _free_port, page  # noqa: F401
from tests.two_trees import NEW, OLD, build_two_trees

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def trees_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("trees_web")
    kb = build_two_trees(d)
    port = _free_port()
    log = open(d / "serve.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb", "serve", "--db", str(kb), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, CKKB_CK_REPO_URL=""),
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


def _available(pg) -> list[str]:
    """The `available` cells of the why_missing answer, top to bottom."""
    cells = pg.locator("table.rows-and-columns tbody td.col-available")
    return [t.strip() for t in cells.all_inner_texts()]


def test_tree_dropdown_changes_the_answer(trees_server, page):  # noqa: F811
    page.goto(f"{trees_server}/two/why_missing")
    page.fill('input[name="tile"]', "256x224x64")
    page.select_option('select[name="arch"]', "gfx950")
    tree = page.locator('select[name="tree"]')
    assert tree.is_visible()
    labels = [t.strip() for t in tree.locator("option").all_inner_texts()]
    assert labels == ["(the default trees)", f"{OLD} (ck, default)", f"{NEW} (ck)"]
    page.click('input[type="submit"]')
    page.wait_for_load_state()
    assert _available(page) and "yes" not in _available(page)  # 1.2.0: removed on gfx950
    # the same question of the other tree, through the dropdown
    page.select_option('select[name="tree"]', NEW)
    page.click('input[type="submit"]')
    page.wait_for_load_state()
    assert f"tree={NEW}" in page.url
    assert page.locator('select[name="tree"]').input_value() == NEW
    assert "yes" in _available(page)  # 1.3.0 registers part2 on gfx950
    page.screenshot(path=str(ARTIFACTS / "why_missing_tree.png"), full_page=False)
    # its explain link stays in that tree
    link = page.locator("table.rows-and-columns td.col-instance_id a").first
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"?tree={NEW}")
    assert f"this page reads tree {NEW}" in page.locator("#trees + p").inner_text()


def test_explain_page_across_trees(trees_server, page):  # noqa: F811
    page.goto(f"{trees_server}/-/ckkb/instance/4")
    assert "256x224x64" in page.locator("h1").inner_text()
    table = page.locator("table.ckkb-trees-table")
    assert table.is_visible()
    heads = [t.strip() for t in table.locator("thead th").all_inner_texts()]
    assert heads == ["arch", OLD, NEW]
    gfx950 = table.locator('tr[data-arch="gfx950"] td')
    assert [t.strip() for t in gfx950.all_inner_texts()] == [
        "gfx950",
        "no removed by registration",
        "yes",
    ]
    gfx942 = table.locator('tr[data-arch="gfx942"] td')
    assert [t.strip() for t in gfx942.all_inner_texts()] == ["gfx942", "yes", "yes"]
    assert page.evaluate("document.documentElement.scrollWidth") <= 1440
    page.screenshot(path=str(ARTIFACTS / "explain_across_trees.png"), full_page=True)
    # the other tree's column heading opens that tree's explain page of the same instance
    table.locator(f'th[data-tree="{NEW}"] a').click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/-/ckkb/instance/4?tree={NEW}")
    arch = page.locator('table.ckkb-arch-table tr[data-arch="gfx950"] td')
    assert arch.nth(1).inner_text().strip() == "yes"  # this tree's own per-arch table
    assert page.locator("table.ckkb-trees-table th.ckkb-current").inner_text().strip() == NEW


def test_version_diff_form(trees_server, page):  # noqa: F811
    """version_diff's trees and layout are dropdowns; the answer is read off the fixtures by hand:
    ck_mini's part2 list (..._mk_nk_mn.hpp) has three active mk_nk entries (lines 47, 48, 51);
    ck_mini_next drops line 48's 224x256x64 and registers part2 on gfx950 too, so the other two
    change on gfx950."""
    page.goto(f"{trees_server}/two/version_diff")
    for p in ("from", "to"):
        options = page.locator(f'select[name="{p}"] option')
        assert [t.strip() for t in options.all_inner_texts()] == [OLD, NEW], p
    # `from` and `to` name the trees: no `tree` input, which would change nothing
    assert page.locator('[name="tree"]').count() == 0
    page.select_option('select[name="from"]', OLD)
    page.select_option('select[name="to"]', NEW)
    page.select_option('select[name="layout"]', "mk_nk")
    page.click('input[type="submit"]')
    page.wait_for_load_state()
    summary = page.locator("p.ckkb-summary").inner_text()
    assert f"From {OLD} to {NEW}: 0 added, 1 removed, 2 changed" in summary, summary
    table = page.locator("table.rows-and-columns")
    changes = [t.strip() for t in table.locator("tbody td.col-change").all_inner_texts()]
    assert sorted(changes) == ["changed", "changed", "removed"]
    layouts = {t.strip() for t in table.locator("tbody td.col-layout").all_inner_texts()}
    assert layouts == {"mk_nk"}
    page.screenshot(path=str(ARTIFACTS / "version_diff_trees.png"), full_page=True)
    # a link that keeps a tree (the index page's, read in tree NEW) answers the same, no input
    page.goto(page.url + f"&tree={NEW}")
    assert (
        f"From {OLD} to {NEW}: 0 added, 1 removed, 2 changed"
        in page.locator("p.ckkb-summary").inner_text()
    )
    assert page.locator('[name="tree"]').count() == 0
    page.goto(f"{trees_server}/-/ckkb?tree={NEW}")
    href = page.locator('dt a[href*="/version_diff"]').get_attribute("href")
    assert href is not None and "tree=" not in href, href
    assert "tree=" in (page.locator('dt a[href*="/why_missing"]').get_attribute("href") or "")
    page.goto(f"{trees_server}/two/version_diff?from={OLD}&to={NEW}&layout=mk_nk")
    # no mk_kn entry changed
    page.select_option('select[name="layout"]', "mk_kn")
    page.click('input[type="submit"]')
    page.wait_for_load_state()
    assert page.locator("table.rows-and-columns").count() == 0
    assert "same instances" in page.locator("p.ckkb-summary").inner_text()
    # a name the knowledge base does not hold: a message naming the trees it does, and the form
    response = page.goto(f"{trees_server}/two/version_diff?from={OLD}&to=1.3")
    assert response is not None and response.status == 400
    text = page.locator("body").inner_text()
    assert "unknown CK tree '1.3' for 'to' (did you mean 1.3.0?)" in text
    assert f"holds the CK trees {OLD}, {NEW}" in text
    assert page.locator('select[name="to"]').is_visible()


def test_table_page_reads_the_tree(trees_server, page):  # noqa: F811
    """A table page with `tree` shows that tree's rows (not "0 rows where tree = ..."), and its
    instance links stay in the tree."""
    page.goto(f"{trees_server}/two/instances?tree={NEW}&_col=template")
    heading = page.locator("h3").first.inner_text()
    assert "where tree" not in heading and "source_id in" in heading, heading
    links = page.locator('table.rows-and-columns a[href*="/-/ckkb/instance/"]')
    assert links.count() > 0
    hrefs = {h for h in links.evaluate_all("els => els.map(e => e.getAttribute('href'))")}
    assert all(h.endswith(f"?tree={NEW}") for h in hrefs), hrefs
