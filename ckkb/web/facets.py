"""Facets through the one vocabulary: `pipeline` as v1..v5, `scheduler` by name.

Instance rows keep the value their source spells (a template parameter's name such as `PipVer`
where the registering call binds it; `make_default_loop_scheduler()` where CK calls that
function), so a plain column facet mixes the words with those spellings. This facet type
(`{"vocab": "pipeline"}` in metadata.yaml) counts the same rows, groups the spellings by the word
ckkb.fields gives them (`v3`, `Default`; "template parameter" for the names), and filters a
group with `column__in=[its spellings]`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from datasette.facets import Facet
from datasette.utils import escape_sqlite, path_with_added_args, path_with_removed_args

from ckkb.fields import pipeline_word, scheduler_word

WORDS: dict[str, Callable[[Any], str | None]] = {
    "pipeline": pipeline_word,
    "scheduler": scheduler_word,
}
PARAMETER = "template parameter"


def grouped(column: str, rows: list[tuple[Any, int]]) -> dict[str, list[tuple[Any, int]]]:
    """word -> [(spelling, count)], words in order of their total count."""
    word = WORDS.get(column, lambda v: v)
    out: dict[str, list[tuple[Any, int]]] = {}
    for value, count in rows:
        out.setdefault(word(value) or PARAMETER, []).append((value, count))
    return dict(sorted(out.items(), key=lambda kv: -sum(c for _, c in kv[1])))


class VocabFacet(Facet):
    type = "vocab"

    async def suggest(self) -> list[Any]:
        return []

    async def facet_results(self) -> tuple[list[dict[str, Any]], list[str]]:
        results: list[dict[str, Any]] = []
        timed_out: list[str] = []
        qs = self.get_querystring_pairs()
        for source_and_config in self.get_configs():
            config = source_and_config["config"]
            column = config.get("column") or config["simple"]
            sql = (
                f"select {escape_sqlite(column)} as value, count(*) as count from ({self.sql}) "
                f"where {escape_sqlite(column)} is not null and {escape_sqlite(column)} != '' "
                f"group by {escape_sqlite(column)} limit 500"
            )
            try:
                rows = await self.ds.execute(
                    self.database,
                    sql,
                    self.params,
                    truncate=False,
                    custom_time_limit=self.ds.setting("facet_time_limit_ms"),
                )
            except Exception:  # datasette's QueryInterrupted and friends: reported, not raised
                timed_out.append(column)
                continue
            values = []
            for word, spellings in grouped(
                column, [(r["value"], r["count"]) for r in rows]
            ).items():
                raw = [s for s, _ in spellings]
                key, val = (
                    (column, str(raw[0]))
                    if len(raw) == 1
                    else (
                        f"{column}__in",
                        json.dumps(raw),
                    )
                )
                selected = (key, val) in qs
                path = (
                    path_with_removed_args(self.request, {key: val})
                    if selected
                    else path_with_added_args(self.request, {key: val})
                )
                values.append(
                    {
                        "value": word,
                        "label": word,
                        "count": sum(c for _, c in spellings),
                        "toggle_url": self.ds.absolute_url(self.request, self.ds.urls.path(path)),
                        "selected": selected,
                    }
                )
            results.append(
                {
                    "name": column,
                    "type": self.type,
                    "hideable": False,
                    "toggle_url": self.ds.urls.path(
                        path_with_removed_args(self.request, {"_facet_vocab": column})
                    ),
                    "results": values,
                    "truncated": False,
                }
            )
        return results, timed_out
