"""Doc answers fit ``kernel.max_result_bytes`` as sent, and say how to read the rest.

A 2 MB doc in 106 lines (inside the write caps) through the SDK's HTTP client, which refuses a
server-sent event over 1 MiB: the write is reported as the success it is, read_doc pages through
the whole text, a resource read and a prompt are cut with a note. And one procedure whose
`## Inputs` lists 100,000 names leaves prompts/list small, with every other prompt in it.
"""

from __future__ import annotations

import gc
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import INVALID_PARAMS, EmbeddedResource, TextContent, TextResourceContents

from _tests.server.test_http import HttpServer, token_file_of
from _tests.support.results import text_of
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.procedures import MAX_INPUTS
from biopb_mcp.server import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 1_000_000
"""kernel.max_result_bytes by default."""

CLIENT_EVENT_LIMIT = 1_048_576


def big_procedure(tag: str = "v1", lines: int = 100, width: int = 20_000) -> str:
    """About ``lines * width`` bytes in ``lines + 6`` lines: a procedure with one input."""
    body = "\n".join(f"{n:03d} {tag} " + "step " * (width // 5) for n in range(lines))
    return f"# Huge\n\n## Inputs\n- `image`: the image file.\n\n## Steps\n{body}\n"


def many_inputs(names: int = 100_000) -> str:
    """A procedure whose Inputs list names ``names`` inputs (about 930 KB)."""
    listed = ", ".join(f"`in{n}`" for n in range(names))
    return f"# Wide\n\n## Inputs\n- {listed}: every one of them.\n\n## Steps\n1. go\n"


def sent_size(result: Any) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    running = HttpServer(tmp_path_factory.mktemp("docsize"))
    yield running
    running.stop()


async def test_a_2_mb_doc_over_http_writes_reads_and_prompts_in_bounded_answers(server: HttpServer) -> None:
    token = token_file_of(server.root, server.proc.pid).read_text().strip()
    doc = big_procedure()
    assert len(doc.encode()) > 2_000_000 and doc.count("\n") == 106
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=120) as http:
        with anyio.fail_after(240):
            async with Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client:
                wrote = await client.call_tool("write_doc", {"id": "huge", "body": doc})
                rewrote = await client.call_tool("write_doc", {"id": "huge", "body": big_procedure("v2")})
                pages = [await client.call_tool("read_doc", {"id": "huge"})]
                while match := re.search(r'read_doc\("huge", page=(\d+)\)', text_of(pages[-1])):
                    pages.append(await client.call_tool("read_doc", {"id": "huge", "page": int(match.group(1))}))
                beyond = await client.call_tool("read_doc", {"id": "huge", "page": len(pages) + 1})
                history = await client.call_tool("read_doc", {"id": "huge@v1"})
                resource = await client.read_resource("biopb://docs/huge")
                prompt = await client.get_prompt("huge", {"image": "cells.tif"})
                hits = await client.call_tool("search_docs", {"query": "step", "max_results": 50})
    for answer in (wrote, rewrote, *pages, history, hits):
        assert not answer.is_error, text_of(answer)[:300]
        assert sent_size(answer) < LIMIT < CLIENT_EVENT_LIMIT
    assert "The write succeeded" in text_of(wrote) and "The write succeeded" in text_of(rewrote)
    # the pages hold the whole doc, in order, each line once
    body = "".join(
        re.sub(r"\n\[huge is longer than one answer holds.*\]\n\Z", "", text_of(p), flags=re.S) for p in pages
    )
    assert body.split("\n\n", 1)[1] == big_procedure("v2")
    assert len(pages) == 3 and "this is the last page" in text_of(pages[-1])
    assert beyond.is_error and "has no page 4" in text_of(beyond)
    assert 'read_doc("huge@v1", page=2)' in text_of(history)
    contents = resource.contents[0]
    assert isinstance(contents, TextResourceContents) and sent_size(resource) < LIMIT
    assert 'read_doc("huge", page=2)' in contents.text
    embedded = prompt.messages[1].content
    assert isinstance(embedded, EmbeddedResource) and isinstance(embedded.resource, TextResourceContents)
    assert sent_size(prompt) < LIMIT and 'read_doc("huge", page=2)' in embedded.resource.text


async def test_a_procedure_with_100000_inputs_leaves_prompts_list_small_over_http(server: HttpServer) -> None:
    token = token_file_of(server.root, server.proc.pid).read_text().strip()
    local = server.root / "config" / "docs"
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=120) as http:
        with anyio.fail_after(240):
            async with Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client:
                before = {p.name for p in (await client.list_prompts()).prompts}
                (local / "wide.md").write_text(many_inputs())  # by hand: a write would refuse nothing here either
                await client.call_tool(
                    "write_doc", {"id": "index", "old": "ignored:", "new": "- wide: all\n\nignored:"}
                )
                listed = await client.list_prompts()
                got = await client.get_prompt("wide", {})
    assert len(many_inputs().encode()) > 900_000
    names = {p.name for p in listed.prompts}
    assert before <= names and "wide" in names and sent_size(listed) < LIMIT
    wide = next(p for p in listed.prompts if p.name == "wide")
    assert wide.arguments is not None and len(wide.arguments) == MAX_INPUTS
    request = got.messages[0].content
    assert isinstance(request, TextContent) and "further inputs its Inputs section lists" in request.text


async def test_prompts_list_pages_by_bytes_in_process(tmp_path: Path, isolated_dirs: Path) -> None:
    """With a small bound the list comes in pages whose cursor resumes after the last name."""
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    (isolated_dirs / "config.toml").write_text("[kernel]\nmax_result_bytes = 65536\n")
    mcp, state = build_server(load_settings())
    try:
        async with Client(mcp, mode="legacy") as client:
            names = [f"p{n:02d}" for n in range(40)]
            for name in names:
                await client.call_tool("write_doc", {"id": name, "body": many_inputs(200).replace("Wide", name)})
            seen: list[str] = []
            cursor = None
            pages = 0
            while True:
                page = await client.list_prompts(cursor=cursor)
                pages += 1
                assert sent_size(page) < 65536
                seen += [p.name for p in page.prompts]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
    finally:
        state.kernel.shutdown()
    assert pages > 1 and set(names) <= set(seen) and len(seen) == len(set(seen))


async def test_edits_of_a_big_listed_doc_leave_no_memory_behind_in_the_server(isolated_dirs: Path) -> None:
    """Each write is noted in the session notebook, held in memory until a kernel starts, and the
    prompt set remembers each procedure: neither may keep a copy per edit."""
    mcp, state = build_server(load_settings())
    try:
        async with Client(mcp, mode="legacy") as client:
            for tag in ("v0", "v1"):  # caches and first-use allocations settle
                await client.call_tool("write_doc", {"id": "big", "body": big_procedure(tag, lines=30, width=10_000)})
                await client.list_prompts()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                for n in range(10):
                    body = big_procedure(f"e{n}", lines=30, width=10_000)
                    assert not (await client.call_tool("write_doc", {"id": "big", "body": body})).is_error
                    await client.list_prompts()
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - base
            finally:
                tracemalloc.stop()
    finally:
        state.kernel.shutdown()
    # each edit used to keep its whole diff (a note) and its whole text (the prompt set): 6.9 MB here
    assert grown < 5 * len(big_procedure("x", lines=30, width=10_000)), f"{grown:,} bytes kept after 10 edits"


async def test_a_prompt_argument_too_long_to_quote_is_refused(isolated_dirs: Path) -> None:
    mcp, state = build_server(load_settings())
    try:
        async with Client(mcp, mode="legacy") as client:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt("flatfield", {"image": "x" * 2_000_000})
            ok = await client.get_prompt("flatfield", {"image": "cells.tif"})
    finally:
        state.kernel.shutdown()
    assert refused.value.code == INVALID_PARAMS and "longer than 4096 characters" in refused.value.error.message
    assert ok.messages
