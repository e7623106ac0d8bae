"""Concurrent writers: two real server processes and a hand editor, one local tier.

Both servers are ``python -m biopb_mcp`` over stdio (one per agent host is the normal way two
processes share a tier). At once: whole-body writes of the same doc from both, creates from both
(each appends to the index), the same old/new edit of the index and of a doc from both, and a
thread editing the shared doc by hand, in place, as an editor would. Afterwards: no torn file,
every server write is the final text or in history, the losing old/new was refused and left no
trace, every create has its one index line. The round and its checks are ``python -m bench
soak``'s, which runs them for minutes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client

from _tests.support.raw_server import write_config
from _tests.support.rel_helpers import stdio_params
from _tests.support.soak import writers
from biopb_mcp.docs.store import DocStore
from biopb_mcp.text.doc_views import read_doc

pytestmark = pytest.mark.anyio

KEEP = 1000


async def test_two_servers_and_a_hand_editor(tmp_path: Path, counts: Counter[str]) -> None:
    env = write_config(tmp_path, f"[docs]\nhistory_keep = {KEEP}\n")
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    store = DocStore(local, history_keep=KEEP)
    assert read_doc(store, "index@diff")  # seeds the local index
    r = writers.Round("once", body_writes=10, creates=8, hand_edits=10)
    writers.prepare_round(store, r)

    with anyio.fail_after(150):
        async with (
            Client(stdio_params(env), mode="legacy", read_timeout_seconds=60) as a,
            Client(stdio_params(env), mode="auto", read_timeout_seconds=60) as b,
        ):
            result = await writers.run_round({"A": a, "B": b}, local, r, history_keep=KEEP)

    assert result.calls == 2 * (r.body_writes + r.creates + 2)
    assert result.hand_edits == r.hand_edits
    assert not result.problems, result.problems
    counts["concurrent operations (2 servers + hand editor)"] += result.calls + result.hand_edits
    for key, value in result.tally.items():
        counts[f"concurrent: {key}"] += value
