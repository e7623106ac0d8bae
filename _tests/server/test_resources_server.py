"""Resources through the real server: build_server in-process, and two server processes over stdio.

Under stdio every agent host runs its own server over the same local tier, so a write made
through one process must reach a subscriber of the other: that is the watcher's job.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import TextResourceContents

from _tests.support.inbox import Inbox, wait_listen
from _tests.support.isolation import isolated_vars
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.resources import INDEX_URI, doc_uri
from biopb_mcp.server import build_server
from biopb_mcp.text.doc_views import read_doc

WAIT = 60.0  # bound on any awaited event (server start-ups included); the watcher polls every second


@pytest.mark.anyio
async def test_build_server_subscribers_in_both_eras_hear_a_write(isolated_dirs: Path) -> None:
    mcp, state = build_server(load_settings())
    inbox = Inbox(WAIT)
    body = "# Spot counting\n\nCount spots in a 2D stain.\n"
    async with (
        Client(mcp, mode="legacy", cache=None, message_handler=inbox) as legacy,
        Client(mcp, cache=None) as modern,
        Client(mcp, cache=None) as writer,
    ):
        with pytest.warns(MCPDeprecationWarning):
            await legacy.subscribe_resource(INDEX_URI)
        async with modern.listen(resource_subscriptions=[INDEX_URI], resources_list_changed=True) as sub:
            result = await writer.call_tool("write_doc", {"id": "lab/spots", "body": body})
            assert not result.is_error, result
            await inbox.wait_for({INDEX_URI}, list_changed=True)
            await wait_listen(sub, {ResourceUpdated(uri=INDEX_URI), ResourcesListChanged()}, WAIT)
        read = await writer.read_resource(doc_uri("lab/spots"))
        (content,) = read.contents
        assert isinstance(content, TextResourceContents)
        assert content.text == read_doc(state.store, "lab/spots")
        listed = await writer.list_resources()
        assert listed.resources[0].uri == INDEX_URI
        assert doc_uri("lab/spots") in [r.uri for r in listed.resources] or listed.next_cursor is not None


def _stdio(root: Path) -> StdioServerParameters:
    env = {**os.environ, **isolated_vars(root)}
    return StdioServerParameters(command=sys.executable, args=["-m", "biopb_mcp"], env=env)


@pytest.mark.anyio
async def test_stdio_two_server_processes_hear_each_others_writes(tmp_path: Path) -> None:
    """A (legacy) and B (2026-07-28) each talk to their own server process over one local tier.

    Each subscribes to the doc only the *other* will write, so what arrives can only have come
    from its own server's watcher noticing the other process's write on disk.
    """
    params = _stdio(tmp_path)
    inbox = Inbox(WAIT)
    async with (
        Client(params, mode="legacy", cache=None, message_handler=inbox, read_timeout_seconds=WAIT) as a,
        Client(params, cache=None, read_timeout_seconds=WAIT) as b,
    ):
        first = await a.list_resources()
        assert first.resources[0].uri == INDEX_URI
        with pytest.warns(MCPDeprecationWarning):
            await a.subscribe_resource(doc_uri("lab/from-b"))
        async with b.listen(resource_subscriptions=[doc_uri("lab/from-a")], resources_list_changed=True) as sub:
            result = await a.call_tool("write_doc", {"id": "lab/from-a", "body": "# From A\n\nWritten by A.\n"})
            assert not result.is_error, result
            await wait_listen(sub, {ResourceUpdated(uri=doc_uri("lab/from-a")), ResourcesListChanged()}, WAIT)
            result = await b.call_tool("write_doc", {"id": "lab/from-b", "body": "# From B\n\nWritten by B.\n"})
            assert not result.is_error, result
            await inbox.wait_for({doc_uri("lab/from-b")}, list_changed=True)
        read = await a.read_resource(doc_uri("lab/from-b"))
        (content,) = read.contents
        assert isinstance(content, TextResourceContents) and "Written by B." in content.text
