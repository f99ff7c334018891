"""The `tree` parameter of the web (canned queries, ckkb's own pages) and the explain page's
availability across trees, on a knowledge base of two CK trees (tests/two_trees.py).

The expected values are read off the fixtures by hand (tests/fixtures/ck_mini_next/README.md says
what differs), not from the extractor: in 1.2.0 part2 is left out on gfx950 by
`if(ck::get_device_name() != "gfx950")`; in 1.3.0 that `if` is gone, and so is part2's 224x256x64
entry. Instance ids are per tree: id 5 is 224x256x64 in 1.2.0 and 256x256x32 in 1.3.0.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from ckkb.web import app
from tests.two_trees import NEW, OLD, build_two_trees


@pytest.fixture(scope="module")
def two_kb(tmp_path_factory):
    return build_two_trees(tmp_path_factory.mktemp("two"))


def run(db, coro_fn):
    ds = app.make_datasette(db)

    async def go():
        await ds.invoke_startup()
        return await coro_fn(ds.client)

    return asyncio.run(go())


def _why(client, tree):
    url = "/two/why_missing.json?tile=256x224x64&arch=gfx950&_shape=array"
    return client.get(url + (f"&tree={tree}" if tree is not None else ""))


def test_canned_query_answers_per_tree(two_kb):
    async def go(client):
        answers = {}
        for tree in (None, "", OLD, NEW):
            r = await _why(client, tree)
            assert r.status_code == 200, r.text
            # one row per registering call (default and kpadding add functions)
            answers[tree] = sorted((x["instance_id"], x["available"]) for x in r.json())
        return answers

    answers = run(two_kb, go)
    # absent, empty and the first tree's name read the same tree: part2 is off on gfx950
    assert answers[None] == answers[""] == answers[OLD] == [(4, 0), (4, 0)]
    # 1.3.0 registers part2 on gfx950 through the default add function
    assert answers[NEW] == [(4, 0), (4, 1)]


def test_canned_query_tree_is_scoped_everywhere(two_kb):
    """A query reading several tables (pool: instances, registrations, availability) sees the
    chosen tree's rows only: 1.3.0 has one part2 instance less."""

    async def go(client):
        out = {}
        for tree in (OLD, NEW):
            r = await client.get(
                f"/two/why_missing.json?tile=224x256x64&arch=gfx942&tree={tree}&_shape=array"
            )
            out[tree] = {x["instance_id"] for x in r.json()}
        return out

    out = run(two_kb, go)
    assert out == {OLD: {5}, NEW: set()}


def test_bad_tree_is_a_400(two_kb):
    async def go(client):
        r = await _why(client, "1.3")
        assert r.status_code == 400
        assert r.json()["errors"] == [
            "unknown tree '1.3' (did you mean 1.3.0?): "
            "this knowledge base holds 1.2.0 (ck), 1.3.0 (ck)"
        ]
        r = await client.get("/two/why_missing?tile=256x224x64&arch=gfx950&tree=nope")
        assert r.status_code == 400 and "unknown tree &#39;nope&#39;" in r.text
        assert '<select name="tree"' in r.text  # the form again, with the dropdown
        r = await client.get("/two/why_missing?tile=256x224x64&arch=gfx950&tree=%201.3.0%20")
        assert r.status_code == 302 and r.headers["location"].endswith("tree=1.3.0")
        for page in ("/", "/-/ckkb", "/-/ckkb/instance/4", "/-/ckkb/search?q=256x224x64"):
            r = await client.get(page + ("&" if "?" in page else "?") + "tree=nope")
            assert r.status_code == 400 and "unknown tree &#39;nope&#39;" in r.text, page

    run(two_kb, go)


def test_tree_dropdown_lists_the_trees(two_kb):
    async def go(client):
        r = await client.get(f"/two/why_missing?tile=256x224x64&arch=gfx950&tree={NEW}")
        assert r.status_code == 200
        select = re.search(r'<select name="tree".*?</select>', r.text, re.S).group(0)
        options = re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>', select)
        assert options == [
            ("", "", "(the default trees)"),
            (OLD, "", f"{OLD} (ck, default)"),
            (NEW, " selected", f"{NEW} (ck)"),
        ]
        # the explain links of the answer stay in the tree
        assert 'href="/-/ckkb/instance/4?tree=1.3.0"' in r.text
        # a link that keeps the tree opens the form, not a page of missing parameters
        r = await client.get(f"/two/why_missing?tree={NEW}")
        assert r.status_code == 200 and "missing parameter" not in r.text
        assert f'<option value="{NEW}" selected>' in r.text

    run(two_kb, go)


def test_version_diff_trees_are_choices(two_kb):
    """version_diff's from and to are dropdowns of the CK trees; a name the knowledge base does
    not hold is a 400 naming the trees it does, never an empty table."""

    async def go(client):
        r = await client.get("/two/version_diff")  # a bare visit: the form
        assert r.status_code == 200
        for p in ("from", "to"):
            select = re.search(rf'<select name="{p}".*?</select>', r.text, re.S)
            assert select, p
            assert re.findall(r'<option value="([^"]*)"', select.group(0)) == [OLD, NEW]
        layouts = re.search(r'<select name="layout".*?</select>', r.text, re.S).group(0)
        # `grep -rhoE "(Row|Col), (Row|Col), Row," tests/fixtures/ck_mini/library/src`: Row,Row and
        # Row,Col entries only (mk_kn, mk_nk), after "any"
        assert re.findall(r'<option value="([^"]*)"', layouts) == ["", "mk_kn", "mk_nk"]
        r = await client.get(f"/two/version_diff?from={OLD}&to={NEW}")
        assert r.status_code == 200
        assert f'<option value="{NEW}" selected>' in r.text
        r = await client.get(f"/two/version_diff.json?from=1.3&to={NEW}")
        assert r.status_code == 400
        assert r.json()["errors"] == [
            "unknown CK tree '1.3' for 'from' (did you mean 1.3.0?): "
            "this knowledge base holds the CK trees 1.2.0, 1.3.0"
        ]
        r = await client.get(f"/two/version_diff?from={OLD}&to=nope")
        assert r.status_code == 400 and "unknown CK tree &#39;nope&#39; for &#39;to&#39;" in r.text
        assert '<select name="to"' in r.text  # the form again

    run(two_kb, go)


def _trees_table(html):
    table = re.search(r'<table class="ckkb-t ckkb-trees-table">.*?</table>', html, re.S)
    assert table, "no across-trees table"
    heads = re.findall(r'<th data-tree="([^"]+)"[^>]*><a href="([^"]+)"', table.group(0))
    cells = {}
    for arch, row in re.findall(r'<tr data-arch="([^"]+)">(.*?)</tr>', table.group(0), re.S):
        td = r'<td class="ckkb-nw" data-tree="([^"]+)"[^>]*>(.*?)</td>'
        for tree, cell in re.findall(td, row):
            text = re.sub(r"<[^>]+>", "", cell).strip()
            cells[(arch, tree)] = text
    return heads, cells


def test_explain_page_across_trees(two_kb):
    async def go(client):
        r = await client.get("/-/ckkb/instance/4")
        assert r.status_code == 200
        heads, cells = _trees_table(r.text)
        assert heads == [(OLD, "/-/ckkb/instance/4"), (NEW, "/-/ckkb/instance/4?tree=1.3.0")]
        assert cells[("gfx950", OLD)] == "no removed by registration"
        assert cells[("gfx950", NEW)] == "yes"
        assert cells[("gfx942", OLD)] == cells[("gfx942", NEW)] == "yes"
        # 224x256x64 (id 5 of 1.2.0) is not in 1.3.0
        r = await client.get("/-/ckkb/instance/5")
        heads, cells = _trees_table(r.text)
        assert [h[0] for h in heads] == [OLD]
        assert re.search(r'Not in <b class="ckkb-tree-missing">1\.3\.0</b>', r.text)
        # id 5 of 1.3.0 is another instance: 256x256x32, commented out in both trees (id 6)
        r = await client.get(f"/-/ckkb/instance/5?tree={NEW}")
        assert r.status_code == 200 and "256x256x32" in r.text
        assert "this page reads tree <b>1.3.0</b>" in r.text
        heads, cells = _trees_table(r.text)
        assert heads == [(OLD, "/-/ckkb/instance/6"), (NEW, "/-/ckkb/instance/5?tree=1.3.0")]
        assert cells[("gfx942", OLD)] == cells[("gfx942", NEW)] == "no removed by commented out"
        r = await client.get(f"/-/ckkb/instance/999?tree={NEW}")
        assert r.status_code == 404 and "(tree 1.3.0)" in r.text

    run(two_kb, go)


def test_pages_read_the_tree(two_kb):
    async def go(client):
        r = await client.get("/-/ckkb/search?q=224x256x64")
        assert 'href="/-/ckkb/instance/5"' in r.text
        r = await client.get(f"/-/ckkb/search?q=224x256x64&tree={NEW}")
        assert "/-/ckkb/instance/" not in r.text  # gone from 1.3.0
        r = await client.get(f"/?tree={NEW}")
        assert r.status_code == 200
        assert f'<input type="hidden" name="tree" value="{NEW}">' in r.text
        r = await client.get("/two/instances?source_id=2&_col=template")
        assert 'href="/-/ckkb/instance/4?tree=1.3.0"' in r.text  # its row's own tree
        r = await client.get("/two/instances/4,2")
        assert r.status_code == 200

    run(two_kb, go)


def test_table_pages_read_the_tree(two_kb):
    """Datasette's own table pages take `tree` too: its rows only, through a source_id filter,
    not "0 rows where tree = NAME" (a column no table has)."""
    import sqlite3

    conn = sqlite3.connect(two_kb)
    ids = dict(conn.execute("select name, id from sources"))
    per_tree = dict(conn.execute("select source_id, count(*) from instances group by source_id"))
    conn.close()

    async def go(client):
        for tree, want in ((NEW, {ids[NEW]}), (OLD, {ids[OLD]}), ("", set(ids.values()))):
            r = await client.get(f"/two/instances.json?tree={tree}&_shape=objects&_size=max")
            assert r.status_code == 200, r.text
            rows = r.json()["rows"]
            assert {x["source_id"] for x in rows} == want, tree
            assert len(rows) == sum(per_tree[i] for i in want)
        r = await client.get(f"/two/instances?tree={NEW}")
        assert r.status_code == 200 and "where tree =" not in r.text
        # its instance links stay in the tree
        assert 'href="/-/ckkb/instance/4?tree=1.3.0"' in r.text
        r = await client.get("/two/instances?tree=nope")
        assert r.status_code == 400 and "unknown tree &#39;nope&#39;" in r.text
        # the explain page's 404 links to the instances of the tree it reads
        r = await client.get(f"/-/ckkb/instance/999?tree={NEW}")
        assert 'href="/two/instances?tree=1.3.0"' in r.text

    run(two_kb, go)


def test_a_tree_added_while_serving_is_served(tmp_path):
    """A build renames a new file over the served one: a request for the tree it added finds it
    (the list of trees is read again, not kept from the old file)."""
    import os

    from ckkb import pipeline
    from ckkb.kb.build import build
    from ckkb.sources import ck_tree, named_tree
    from tests.two_trees import FIXTURES

    served = tmp_path / "two.db"
    build(served, [named_tree(ck_tree(FIXTURES / "ck_mini"), OLD)], stages=pipeline.stages())
    ds = app.make_datasette(served)

    async def go():
        await ds.invoke_startup()
        r = await ds.client.get(f"/-/ckkb/instance/4?tree={NEW}")
        assert r.status_code == 400 and "unknown tree" in r.text
        newer = build_two_trees(tmp_path / "next")
        os.replace(newer, served)  # what a build does at its end
        r = await ds.client.get(f"/-/ckkb/instance/4?tree={NEW}")
        assert r.status_code == 200 and "this page reads tree <b>1.3.0</b>" in r.text

    (tmp_path / "next").mkdir()
    asyncio.run(go())


def test_a_copy_of_a_tree_is_served_as_that_tree(tmp_path):
    """A copy of the default tree holds no rows of its own (`shared_rows`): its table pages,
    canned queries and explain page read the default tree's rows, and its links stay in it.
    Second method: the same requests for the tree it copies, and sqlite3 counts."""
    import shutil
    import sqlite3

    from ckkb import pipeline
    from ckkb.kb.build import build
    from ckkb.sources import ck_tree, named_tree
    from tests.two_trees import FIXTURES

    db = build_two_trees(tmp_path)
    shutil.copytree(FIXTURES / "ck_mini", tmp_path / "copy")
    trees = [
        named_tree(ck_tree(FIXTURES / "ck_mini"), OLD),
        named_tree(ck_tree(tmp_path / "ck_mini_next"), NEW),
        named_tree(ck_tree(tmp_path / "copy"), "twin"),
    ]
    assert build(db, trees, stages=pipeline.stages(), jobs=1).extended
    conn = sqlite3.connect(db)
    ids = dict(conn.execute("select name, id from sources"))
    assert conn.execute("select rows_of from sources where name = 'twin'").fetchone() == (ids[OLD],)
    old_rows = conn.execute("select count(*) from instances where source_id = ?", [ids[OLD]])
    n_old = old_rows.fetchone()[0]
    conn.close()

    async def go(client):
        r = await client.get("/two/instances.json?tree=twin&_shape=objects&_size=max")
        rows = r.json()["rows"]
        assert {x["source_id"] for x in rows} == {ids[OLD]} and len(rows) == n_old
        assert (await _why(client, "twin")).json() == (await _why(client, OLD)).json()
        r = await client.get("/two/instances?tree=twin")
        assert 'href="/-/ckkb/instance/4?tree=twin"' in r.text  # links stay in the copy
        r = await client.get("/-/ckkb/instance/4?tree=twin")
        assert r.status_code == 200 and "this page reads tree <b>twin</b>" in r.text

    run(db, go)
