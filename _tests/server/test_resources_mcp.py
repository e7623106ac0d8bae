"""Docs as MCP resources through real client sessions, in both protocol eras.

Most tests serve a bare ``MCPServer`` with ``install_resources`` and a small write tool that does
what the server's write_doc does (store.write_doc, then ``notifier.after_write``): a real server,
not a mock, with a fast watcher poll. ``test_resources_server.py`` goes through build_server and real stdio.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client, MCPError
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import TextResourceContents

from _tests.support.doc_corpus import make_corpus
from _tests.support.inbox import Inbox, wait_listen
from _tests.support.isolation import make_settings
from _tests.support.results import text_of
from biopb_mcp.docs import changes as changes_mod
from biopb_mcp.docs.resources import INDEX_URI, doc_uri
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocError
from biopb_mcp.fs.watch import WatchUnavailable
from biopb_mcp.kernel import KernelHost
from biopb_mcp.server.resources.handlers import install_resources
from biopb_mcp.server.resources.subscriptions import DocNotifier, changes
from biopb_mcp.server.state import AppState
from biopb_mcp.server.tools.docs import register_doc_tools
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.docs import FOR_AGENT, refusal

MODES = ["legacy", "auto"]

WAIT = 10.0  # upper bound on any awaited event; passing runs take milliseconds to ~1 s


def make_server(local: Path, shipped: Path, poll: float = 0.05) -> tuple[MCPServer[Any], DocStore, DocNotifier]:
    """A real server over the two tiers: resources installed, and the real docs tools (write_doc
    among them) on the same state, as ``build_server`` wires them; no kernel is started."""
    mcp: MCPServer[Any] = MCPServer("biopb-test")
    store = DocStore(local, shipped_dir=shipped)
    settings = make_settings(local.parent / "server")
    state = AppState(settings=settings, store=store, kernel=KernelHost(settings))
    state.notifier = notifier = install_resources(mcp, store, poll_interval=poll)
    register_doc_tools(mcp, state)
    return mcp, store, notifier


@pytest.fixture
def corpus250(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    return make_corpus(tmp_path, 250)


async def walk(client: Client, cursor: str | None = None) -> tuple[list[list[str]], str | None]:
    """Pages of URIs from ``cursor`` to the end."""
    pages: list[list[str]] = []
    while True:
        result = await client.list_resources(cursor=cursor)
        pages.append([r.uri for r in result.resources])
        if result.next_cursor is None:
            return pages, None
        assert result.next_cursor == result.resources[-1].uri
        cursor = result.next_cursor


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_paging_250_docs_three_pages_no_duplicates_no_gaps(
    corpus250: tuple[Path, Path, list[str]], mode: str
) -> None:
    local, shipped, ids = corpus250
    mcp, _, _ = make_server(local, shipped)
    async with Client(mcp, mode=mode, cache=None) as client:
        pages, _ = await walk(client)
        first = await client.list_resources()
    assert [len(p) for p in pages] == [100, 100, 51]
    flat = [u for p in pages for u in p]
    assert flat == [INDEX_URI] + [doc_uri(i) for i in ids]
    index, doc = first.resources[0], first.resources[1]
    assert index.mime_type == doc.mime_type == "text/markdown"
    assert doc.name == f"Title {int(ids[0][-4:])}" and doc.description and doc.description.startswith("What doc")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_cursor_taken_before_a_restart_resumes_after_it(
    corpus250: tuple[Path, Path, list[str]], mode: str
) -> None:
    local, shipped, ids = corpus250
    before, _, _ = make_server(local, shipped)
    async with Client(before, mode=mode, cache=None) as client:
        page1 = await client.list_resources()
    after, _, _ = make_server(local, shipped)  # a new server process would see exactly this
    async with Client(after, mode=mode, cache=None) as client:
        rest, _ = await walk(client, page1.next_cursor)
    flat = [r.uri for r in page1.resources] + [u for p in rest for u in p]
    assert flat == [INDEX_URI] + [doc_uri(i) for i in ids]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_doc_created_behind_the_cursor_does_not_break_the_walk(tmp_path: Path, mode: str) -> None:
    local, shipped, ids = make_corpus(tmp_path, 150)  # room under the index cap for one more entry
    mcp, _, _ = make_server(local, shipped)
    async with Client(mcp, mode=mode, cache=None) as client:
        page1 = await client.list_resources()
        await client.call_tool("write_doc", {"id": "aaa/new", "body": "# New\n\nA new doc.\n"})
        rest, _ = await walk(client, page1.next_cursor)
        fresh, _ = await walk(client)
    flat = [r.uri for r in page1.resources] + [u for p in rest for u in p]
    assert flat == [INDEX_URI] + [doc_uri(i) for i in ids]
    assert doc_uri("aaa/new") in fresh[0]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_bad_cursor_is_invalid_params(tmp_path: Path, mode: str) -> None:
    local, shipped, _ = make_corpus(tmp_path, 3)
    mcp, _, _ = make_server(local, shipped)
    async with Client(mcp, mode=mode, cache=None) as client:
        for cursor in ["not-a-cursor", "biopb://docs/a b"]:
            with pytest.raises(MCPError) as err:
                await client.list_resources(cursor=cursor)
            assert err.value.error.code == -32602


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_read_as_resource_equals_read_doc_byte_for_byte(tmp_path: Path, mode: str) -> None:
    local, shipped, ids = make_corpus(tmp_path, 5)
    (shipped / "shared").mkdir()
    (shipped / "shared" / "tool.md").write_text("# Tool\n\nShipped text.\n", encoding="utf-8")
    mcp, store, _ = make_server(local, shipped)
    async with Client(mcp, mode=mode, cache=None) as client:
        await client.call_tool("write_doc", {"id": "shared/tool", "body": "# Tool\n\nLocal text.\n"})
        await client.call_tool("write_doc", {"id": ids[0], "body": "# Title 0\n\nSecond version.\n"})
        refs = ["index", ids[0], ids[1], "shared/tool", "shared/tool@diff", f"{ids[0]}@history", f"{ids[0]}@v1"]
        for ref in refs:
            result = await client.read_resource(doc_uri(ref))
            (content,) = result.contents
            assert isinstance(content, TextResourceContents)
            assert content.text == read_doc(store, ref, FOR_AGENT), ref
            assert content.mime_type == "text/markdown"
        templates = await client.list_resource_templates()
    assert [t.uri_template for t in templates.resource_templates] == ["biopb://docs/{+id}"]


@pytest.mark.anyio
async def test_unknown_doc_is_invalid_params_naming_the_closest_ids(tmp_path: Path) -> None:
    local, shipped, ids = make_corpus(tmp_path, 5)
    mcp, store, _ = make_server(local, shipped)
    typo = ids[0].replace("doc-", "dco-")
    with pytest.raises(DocError) as expected:
        read_doc(store, typo)
    async with Client(mcp, mode="legacy", cache=None) as client:  # legacy carries the server's text
        with pytest.raises(MCPError) as err:
            await client.read_resource(doc_uri(typo))
        assert err.value.error.code == -32602
        assert err.value.error.message == refusal(expected.value, FOR_AGENT)
        with pytest.raises(MCPError) as bad:
            await client.read_resource("biopb://docs/../etc/passwd")
        assert bad.value.error.code == -32602
    async with Client(mcp, cache=None) as client:
        with pytest.raises(MCPError) as err:
            await client.read_resource(doc_uri(typo))
        assert err.value.error.code == -32602


@pytest.mark.anyio
async def test_unreadable_file_is_skipped_with_a_log_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    local, shipped, ids = make_corpus(tmp_path, 4)
    (local / f"{ids[1]}.md").write_bytes(b"# Bad\n\n\xff\xfe\xfd not utf-8\n")
    unreadable = ids[2]
    os.chmod(local / f"{unreadable}.md", 0)
    root = os.geteuid() == 0  # root reads a mode-000 file anyway; then only the non-UTF-8 one is bad
    mcp, _, _ = make_server(local, shipped)
    try:
        with caplog.at_level(logging.WARNING):
            async with Client(mcp, mode="legacy", cache=None) as client:
                pages, _ = await walk(client)
                with pytest.raises(MCPError) as err:  # read directly: the store's refusal, as read_doc gives it
                    await client.read_resource(doc_uri(ids[1]))
                assert err.value.error.code == -32603 and ids[1] in err.value.error.message
    finally:
        os.chmod(local / f"{unreadable}.md", 0o644)
    uris = pages[0]
    assert doc_uri(ids[1]) not in uris and doc_uri(ids[0]) in uris and doc_uri(ids[3]) in uris
    assert (doc_uri(unreadable) in uris) is root
    assert any(ids[1] in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


@pytest.mark.anyio
async def test_legacy_capabilities_advertise_subscribe_and_list_changed(tmp_path: Path) -> None:
    local, shipped, _ = make_corpus(tmp_path, 1)
    mcp, _, _ = make_server(local, shipped)
    async with Client(mcp, mode="legacy", cache=None) as client:
        caps = client.server_capabilities.resources
        assert caps is not None and caps.subscribe and caps.list_changed
    async with Client(mcp, cache=None) as client:
        caps = client.server_capabilities.resources
        assert caps is not None and caps.subscribe and caps.list_changed


async def legacy_subscribe(client: Client, uri: str) -> None:
    with pytest.warns(MCPDeprecationWarning):
        await client.subscribe_resource(uri)


async def legacy_unsubscribe(client: Client, uri: str) -> None:
    with pytest.warns(MCPDeprecationWarning):
        await client.unsubscribe_resource(uri)


@pytest.mark.anyio
async def test_legacy_subscriber_hears_another_clients_write(tmp_path: Path) -> None:
    local, shipped, ids = make_corpus(tmp_path, 3)
    mcp, _, notifier = make_server(local, shipped, poll=60)  # the write, not the watcher, must notify
    inbox_a, inbox_c = Inbox(WAIT), Inbox(WAIT)
    async with (
        Client(mcp, mode="legacy", cache=None, message_handler=inbox_a) as a,
        Client(mcp, mode="legacy", cache=None, message_handler=inbox_c),
        Client(mcp, mode="legacy", cache=None) as b,
    ):
        await legacy_subscribe(a, INDEX_URI)
        await legacy_subscribe(a, doc_uri(ids[0]))
        await b.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nBy B.\n"})
        await inbox_a.wait_for({INDEX_URI, doc_uri(ids[0])})
        await b.call_tool("write_doc", {"id": "fresh/doc", "body": "# Fresh\n\nNew.\n"})
        await inbox_a.wait_for(set(), list_changed=True)
        await inbox_c.wait_for(set(), list_changed=True)  # list_changed reaches unsubscribed clients too
        assert inbox_c.updated == []  # C subscribed to nothing
        await legacy_unsubscribe(a, INDEX_URI)
        await legacy_unsubscribe(a, doc_uri(ids[0]))
        assert not notifier.watching
    assert notifier._sessions == {}  # every connection forgotten on disconnect


@pytest.mark.anyio
async def test_modern_listener_hears_another_clients_write(tmp_path: Path) -> None:
    local, shipped, _ = make_corpus(tmp_path, 3)
    mcp, _, notifier = make_server(local, shipped, poll=60)
    async with Client(mcp, cache=None) as a, Client(mcp, cache=None) as b:
        async with a.listen(resource_subscriptions=[INDEX_URI], resources_list_changed=True) as sub:
            assert notifier.watching
            await b.call_tool("write_doc", {"id": "fresh/doc", "body": "# Fresh\n\nNew.\n"})
            await wait_listen(sub, {ResourceUpdated(uri=INDEX_URI), ResourcesListChanged()}, WAIT)
        with anyio.fail_after(WAIT):
            while notifier.watching:  # the listen stream's end reaches the server asynchronously
                await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_legacy_subscriber_hears_a_hand_edit(tmp_path: Path) -> None:
    local, shipped, ids = make_corpus(tmp_path, 3)
    mcp, _, notifier = make_server(local, shipped)
    inbox = Inbox(WAIT)
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as a:
        assert not notifier.watching
        await legacy_subscribe(a, doc_uri(ids[1]))
        assert notifier.watching
        (local / f"{ids[1]}.md").write_text("# Edited by hand\n\nin an editor, much longer now.\n", encoding="utf-8")
        await inbox.wait_for({doc_uri(ids[1])})
        (local / "by-hand.md").write_text("# By hand\n", encoding="utf-8")  # a new file: the list may change
        await inbox.wait_for(set(), list_changed=True)
    assert not notifier.watching  # disconnect dropped the last subscription


@pytest.mark.anyio
async def test_modern_listener_hears_a_hand_edit(tmp_path: Path) -> None:
    local, shipped, ids = make_corpus(tmp_path, 3)
    mcp, _, _ = make_server(local, shipped)
    async with Client(mcp, cache=None) as a:
        async with a.listen(resource_subscriptions=[INDEX_URI, doc_uri(ids[2])]) as sub:
            text = (local / "index.md").read_text(encoding="utf-8")
            (local / "index.md").write_text(text + "- grp9/missing: a hand-added entry\n", encoding="utf-8")
            (local / f"{ids[2]}.md").write_text("# Edited\n\nby hand, longer.\n", encoding="utf-8")
            await wait_listen(sub, {ResourceUpdated(uri=INDEX_URI), ResourceUpdated(uri=doc_uri(ids[2]))}, WAIT)


@pytest.mark.anyio
async def test_subscribing_to_a_foreign_uri_is_refused(tmp_path: Path) -> None:
    local, shipped, _ = make_corpus(tmp_path, 1)
    mcp, _, notifier = make_server(local, shipped)
    async with Client(mcp, mode="legacy", cache=None) as a:
        with pytest.raises(MCPError) as err:
            await legacy_subscribe(a, "file:///etc/passwd")
        assert err.value.error.code == -32602
        assert not notifier.watching


def test_changes_between_snapshots() -> None:
    old = {"index": (1, 10), "a": (1, 5), "b": (1, 5)}
    assert changes(old, dict(old)) == ([], False)
    assert changes(old, {**old, "a": (2, 5)}) == ([doc_uri("a")], False)
    assert changes(old, {**old, "index": (2, 11)}) == ([INDEX_URI], True)
    gone = {k: v for k, v in old.items() if k != "b"}
    assert changes(old, gone) == ([INDEX_URI, doc_uri("b")], True)
    assert changes(gone, old) == ([INDEX_URI, doc_uri("b")], True)



@pytest.mark.anyio
async def test_an_index_write_announces_the_index_once(tmp_path: Path) -> None:
    """write_doc("index") is a write to the index URI only: one resources/updated, not two."""
    local, shipped, ids = make_corpus(tmp_path, 2)
    mcp, _, _ = make_server(local, shipped, poll=60)  # the write, not the watcher, must notify
    inbox = Inbox(WAIT)
    async with (
        Client(mcp, mode="legacy", cache=None, message_handler=inbox) as a,
        Client(mcp, mode="legacy", cache=None) as b,
    ):
        await legacy_subscribe(a, INDEX_URI)
        await legacy_subscribe(a, doc_uri(ids[0]))
        await b.call_tool("write_doc", {"id": "index", "body": f"# Docs\n\n- {ids[0]}: one\n"})
        # One connection's notifications arrive in order: once the doc's arrives, the index write's have.
        await b.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nBy B.\n"})
        await inbox.wait_for({doc_uri(ids[0])})
        assert inbox.updated.count(INDEX_URI) == 2  # one per write


@pytest.mark.anyio
async def test_a_write_is_announced_once_while_the_watcher_runs(tmp_path: Path) -> None:
    """The write and the watcher both see the change; subscribers hear of it once, whoever made it."""
    local, shipped, ids = make_corpus(tmp_path, 2)
    mcp, _, notifier = make_server(local, shipped, poll=0.05)
    inbox = Inbox(WAIT)
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as client:
        await legacy_subscribe(client, INDEX_URI)
        await legacy_subscribe(client, doc_uri(ids[0]))
        assert notifier.watching
        await client.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nOnce.\n"})
        await inbox.wait_for({doc_uri(ids[0]), INDEX_URI})
        await anyio.sleep(0.5)  # ten more looks at the disk: none may announce the write again
        assert inbox.updated.count(doc_uri(ids[0])) == 1 and inbox.updated.count(INDEX_URI) == 1, inbox.updated
        (local / f"{ids[0]}.md").write_text("# By hand\n\nAn editor saved this.\n")  # a change no write made
        with anyio.fail_after(WAIT):
            while inbox.updated.count(doc_uri(ids[0])) < 2:
                await anyio.sleep(0.02)
        await anyio.sleep(0.5)
        assert inbox.updated.count(doc_uri(ids[0])) == 2, inbox.updated


@pytest.mark.anyio
async def test_one_feed_tells_both_search_and_subscribers_of_a_hand_edit(tmp_path: Path) -> None:
    """The store's change feed has two readers; one event reaches each: the subscriber is told,
    and the next search finds the new text."""
    local, shipped, ids = make_corpus(tmp_path, 3)
    mcp, store, _ = make_server(local, shipped)
    inbox = Inbox(WAIT)
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as a:
        assert "Title 1" in text_of(await a.call_tool("search_docs", {"query": "thing 1"}))  # search follows the feed
        await legacy_subscribe(a, doc_uri(ids[1]))
        (local / f"{ids[1]}.md").write_text("# Edited by hand\n\n## Steps\nzebrafishword\n", encoding="utf-8")
        await inbox.wait_for({doc_uri(ids[1])})
        assert store.changes.readers == 2  # search and the subscription watcher, on one watch
        assert ids[1] in text_of(await a.call_tool("search_docs", {"query": "zebrafishword"}))


@pytest.mark.anyio
async def test_without_folder_watches_a_hand_edit_is_still_announced(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def refused() -> None:
        raise WatchUnavailable(28, "inotify watch limit reached")

    monkeypatch.setattr(changes_mod, "DirWatch", refused)  # the watcher then walks the tier at each look
    local, shipped, ids = make_corpus(tmp_path, 3)
    mcp, _, _ = make_server(local, shipped)
    inbox = Inbox(WAIT)
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as a:
        await legacy_subscribe(a, doc_uri(ids[2]))
        (local / f"{ids[2]}.md").write_text("# Edited by hand\n\nwith no watch at all.\n", encoding="utf-8")
        await inbox.wait_for({doc_uri(ids[2])})


@pytest.mark.anyio
@pytest.mark.parametrize("n_docs", [3, 600])
async def test_back_to_back_writes_are_each_announced_once(tmp_path: Path, n_docs: int) -> None:
    """The watcher and the writes race (a write lands during the watcher's walk, or its entry
    arrives after the walk saw it): every write is still announced exactly once."""
    local, shipped, ids = make_corpus(tmp_path, n_docs)
    mcp, _, _ = make_server(local, shipped, poll=0.01)
    inbox = Inbox(WAIT)
    writes = 40
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as a:
        await legacy_subscribe(a, doc_uri(ids[0]))
        for i in range(writes):  # sizes differ, so no two writes leave the same stamp
            await a.call_tool("write_doc", {"id": ids[0], "body": f"# Changed {i}\n\n" + "x" * i + "\n"})
        with anyio.fail_after(WAIT):
            while inbox.updated.count(doc_uri(ids[0])) < writes:
                await anyio.sleep(0.02)
        await anyio.sleep(0.5)  # fifty more looks: none may repeat a write
    assert inbox.updated.count(doc_uri(ids[0])) == writes


@pytest.mark.anyio
async def test_a_subscribe_cancelled_while_the_watcher_starts_leaves_it_running(tmp_path: Path) -> None:
    local, shipped, ids = make_corpus(tmp_path, 3)
    mcp, store, notifier = make_server(local, shipped, poll=0.05)
    started, go = threading.Event(), threading.Event()
    walk = store.listing.list_inputs

    def slow_walk() -> tuple[list[str], list[str], bool]:
        started.set()
        go.wait(10)  # the tier's walk is under way when the client gives up
        return walk()

    store.listing.list_inputs = slow_walk  # type: ignore[method-assign]
    inbox = Inbox(WAIT)
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as a:
        with anyio.move_on_after(WAIT) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(legacy_subscribe, a, doc_uri(ids[0]))
                await anyio.to_thread.run_sync(started.wait, 10)
                tg.cancel_scope.cancel()  # the client gives up on the subscribe
        assert not scope.cancelled_caught
        go.set()
        store.listing.list_inputs = walk  # type: ignore[method-assign]
        await legacy_subscribe(a, doc_uri(ids[0]))
        with anyio.fail_after(WAIT):
            while not any(t.name == "biopb-docs-watcher" for t in threading.enumerate()):
                await anyio.sleep(0.02)
        await a.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nafter a cancelled subscribe\n"})
        await inbox.wait_for({doc_uri(ids[0])})
    assert notifier.watching is False
