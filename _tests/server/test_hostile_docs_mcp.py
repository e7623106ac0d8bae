"""Hostile doc input through a real MCP client session: the server keeps answering `ping` while
each hostile call runs and right after it, and every call ends with a result or a clear error.

Before the fixes each of these calls held the GIL for tens of seconds to minutes (regex
backtracking, counting overlapping matches, a 2 MB query), freezing every transport.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from _tests.support.results import text_of
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs import QUERY_MAX_CHARS
from biopb_mcp.server import build_server

pytestmark = pytest.mark.anyio

PING_BOUND = 5.0
"""Seconds a ping may take while a hostile call runs: a stalled loop took 24-213 s; a free one
answers in milliseconds (0.12 s at worst beside four busy loops on two cores), so the bound
leaves a loaded machine ample room and still tells a frozen loop apart."""


@pytest.fixture
def built(isolated_dirs: Path, tmp_path: Path) -> Any:
    settings = load_settings()
    settings = replace(settings, kernel=replace(settings.kernel, promote_after=300.0))
    mcp, state = build_server(settings, trace=tmp_path / "trace.jsonl")
    yield mcp
    state.kernel.shutdown()


async def pinged(client: Client, call: Any) -> tuple[Any, float]:
    """Await `call()` while pinging every 20 ms, then once more; returns its result and the slowest ping."""
    worst = 0.0
    done = anyio.Event()
    box: list[Any] = []

    async def run() -> None:
        box.append(await call())
        done.set()

    async def ping() -> None:
        nonlocal worst
        start = time.monotonic()
        with warnings.catch_warnings():  # the SDK flags ping as legacy-era; it is what clients send
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.send_ping()
        worst = max(worst, time.monotonic() - start)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        while not done.is_set():
            await ping()
            await anyio.sleep(0.02)
    await ping()
    return box[0], worst


async def test_hostile_docs_never_stop_the_server_answering_ping(built: Any) -> None:
    evil = "# a" + " " * 2_000 + "b\n\nHarmless prose after a hostile heading.\n\n## c" + " " * 2_000 + "d\n"
    big = "x" * 1_000_000 + "\n"
    with anyio.fail_after(120):
        async with Client(built, mode="legacy") as client:  # ping is a legacy-era request
            steps = [
                ("write_doc evil", lambda: client.call_tool("write_doc", {"id": "evil", "body": evil})),
                ("read_doc evil", lambda: client.call_tool("read_doc", {"id": "evil"})),
                ("search_docs", lambda: client.call_tool("search_docs", {"query": "harmless prose"})),
                ("resources/list", lambda: client.list_resources()),
                ("write_doc big", lambda: client.call_tool("write_doc", {"id": "big", "body": big})),
                (
                    "old/new 10 KB",
                    lambda: client.call_tool("write_doc", {"id": "big", "old": "x" * 10_000, "new": "y"}),
                ),
                ("2 MB query", lambda: client.call_tool("search_docs", {"query": "threshold " * 200_000})),
            ]
            results: dict[str, Any] = {}
            for name, call in steps:
                results[name], worst = await pinged(client, call)
                assert worst < PING_BOUND, f"ping took {worst:.1f} s during {name}"
    assert not results["write_doc evil"].is_error, text_of(results["write_doc evil"])
    assert "Harmless prose" in text_of(results["read_doc evil"])
    assert "evil" in text_of(results["search_docs"])
    assert any(r.uri.endswith("evil") for r in results["resources/list"].resources)
    assert not results["write_doc big"].is_error
    refused = results["old/new 10 KB"]
    assert refused.is_error and "matches 100 times" in text_of(refused)
    query = results["2 MB query"]
    assert query.is_error and f"the most is {QUERY_MAX_CHARS:,}" in text_of(query)
    assert len(text_of(query)) < 500
