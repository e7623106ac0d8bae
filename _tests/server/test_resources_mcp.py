"""Docs as MCP resources through real client sessions, in both protocol eras.

Most tests serve a bare ``MCPServer`` with ``install_resources`` and a small write tool that does
what the server's write_doc does (store.write_doc, then ``notifier.after_write``): a real server,
not a mock, with a fast watcher poll. ``test_resources_server.py`` goes through build_server and real stdio.
"""

from __future__ import annotations

import logging
import os
import threading
import time
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

WAIT = 60.0  # upper bound on any awaited event: passing runs take milliseconds to ~1 s, a loaded machine more


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
        await b.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nBy B.\n"})
        # The watcher may see the doc's change on disk before its write reaches it, and announce
        # the doc before that write's index: wait for every announcement, then count them.
        await until_count(inbox, INDEX_URI, 2)
        await until_count(inbox, doc_uri(ids[0]), 1)
        assert inbox.updated.count(INDEX_URI) == 2, inbox.updated  # one per write


async def until_count(inbox: Inbox, uri: str, count: int) -> None:
    try:
        with anyio.fail_after(WAIT):
            while inbox.updated.count(uri) < count:
                await anyio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(
            f"{uri} announced {inbox.updated.count(uri)} times, not {count}: {inbox.updated}"
        ) from None


async def watcher_looked_again(inbox: Inbox, local: Path, probe: str, times: int) -> None:
    """Make the watcher look at the disk once more, for certain: a hand edit of the doc ``probe``
    (subscribed; a new size each time), which only the watcher can announce, is waited for. One
    connection's notifications arrive in order: whatever that look announced came first."""
    (local / f"{probe}.md").write_text("# Probe\n\n" + "looked " * times + "\n")
    await until_count(inbox, doc_uri(probe), times)


@pytest.mark.anyio
async def test_a_write_is_announced_once_while_the_watcher_runs(tmp_path: Path) -> None:
    """The write and the watcher both see the change; subscribers hear of it once, whoever made it."""
    local, shipped, ids = make_corpus(tmp_path, 2)
    mcp, _, notifier = make_server(local, shipped, poll=0.05)
    inbox = Inbox(WAIT)
    changed, probe = doc_uri(ids[0]), ids[1]
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as client:
        for uri in (INDEX_URI, changed, doc_uri(probe)):
            await legacy_subscribe(client, uri)
        assert notifier.watching
        await client.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nOnce.\n"})
        await inbox.wait_for({changed, INDEX_URI})
        await watcher_looked_again(inbox, local, probe, 1)
        assert inbox.updated.count(changed) == 1 and inbox.updated.count(INDEX_URI) == 1, inbox.updated
        (local / f"{ids[0]}.md").write_text("# By hand\n\nAn editor saved this.\n")  # a change no write made
        await until_count(inbox, changed, 2)
        await watcher_looked_again(inbox, local, probe, 2)
        assert inbox.updated.count(changed) == 2, inbox.updated


CHANCE = 1.0
"""Seconds a forced interleaving waits for the other thread's step: it comes at once where the
interleaving can happen; where it cannot, the wait ends and the test goes on, its outcome the
same however long the wait was."""


@pytest.mark.anyio
@pytest.mark.parametrize("order", ["look, write, queue, take", "write, look, queue"])
async def test_a_write_and_a_look_at_the_disk_never_interleave_into_a_second_announcement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    """Orders a loaded machine can give, forced: a write landing on disk and queued while the
    watcher's look is under way ("look, write, queue, take"), or a look landing between a write
    and its queueing ("write, look, queue"). Either way the change is announced once."""
    local, shipped, ids = make_corpus(tmp_path, 2)
    mcp, store, notifier = make_server(local, shipped, poll=0.05)
    armed, looked, written, handed_over = (threading.Event() for _ in range(4))
    read_tier, store_write, announce = store.shelf.local_state, store.write_doc, notifier.after_write
    look_first = order.startswith("look")

    def local_state() -> dict[str, tuple[int, int]]:
        state = read_tier()
        if armed.is_set() and look_first and not looked.is_set():
            looked.set()
            handed_over.wait(CHANCE)  # the write lands and is queued before this look takes its queue
        elif armed.is_set() and written.is_set():
            looked.set()
        return state

    def write_doc(*args: Any, **kwargs: Any) -> Any:
        if look_first:
            assert looked.wait(WAIT), "the watcher never looked"
        result = store_write(*args, **kwargs)
        written.set()
        if not look_first:
            looked.wait(CHANCE)  # a look reads the tier before this write is queued
        return result

    async def after_write(result: Any) -> None:
        await announce(result)
        handed_over.set()

    monkeypatch.setattr(store.shelf, "local_state", local_state)
    monkeypatch.setattr(store, "write_doc", write_doc)
    monkeypatch.setattr(notifier, "after_write", after_write)
    inbox = Inbox(WAIT)
    changed = doc_uri(ids[0])
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as client:
        for uri in (changed, doc_uri(ids[1])):
            await legacy_subscribe(client, uri)
        armed.set()
        if look_first:  # any change in the tier makes the watcher look
            (local / "nudge.md").write_text("# Nudge\n\nMakes the watcher look.\n")
        await client.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nOnce.\n"})
        await inbox.wait_for({changed})
        await watcher_looked_again(inbox, local, ids[1], 1)
        assert inbox.updated.count(changed) == 1, inbox.updated


@pytest.mark.anyio
async def test_a_change_seen_on_disk_is_not_announced_again_by_its_write_after_other_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher sees a write's change on disk and announces it; before the write reaches it,
    the watcher looks again and finds something else (a hand edit). The write is still not
    announced a second time."""
    local, shipped, ids = make_corpus(tmp_path, 2)
    mcp, store, _ = make_server(local, shipped, poll=0.05)
    inbox = Inbox(WAIT)
    changed = doc_uri(ids[0])
    looks, written = [0], threading.Event()
    read_tier, store_write = store.shelf.local_state, store.write_doc

    def local_state() -> dict[str, tuple[int, int]]:
        state = read_tier()
        looks[0] += written.is_set()
        return state

    def write_doc(*args: Any) -> Any:
        result = store_write(*args)
        written.set()
        deadline = time.monotonic() + WAIT
        while looks[0] < 1 and time.monotonic() < deadline:  # a look sees this change on disk
            time.sleep(0.01)
        (local / "hand.md").write_text("# Hand\n\nAnother change, by hand.\n")
        while looks[0] < 2 and time.monotonic() < deadline:  # and another look sees the hand edit
            time.sleep(0.01)
        return result

    monkeypatch.setattr(store.shelf, "local_state", local_state)
    monkeypatch.setattr(store, "write_doc", write_doc)
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as client:
        for uri in (changed, doc_uri(ids[1])):
            await legacy_subscribe(client, uri)
        await client.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nOnce.\n"})
        assert looks[0] >= 2, "the watcher did not look twice before the write was queued"
        await until_count(inbox, changed, 1)
        await watcher_looked_again(inbox, local, ids[1], 1)
        assert inbox.updated.count(changed) == 1, inbox.updated


class _HeldForWatcher:
    """The notifier's queue lock, as the watcher takes it: held back until ``release`` once
    ``hold`` is set, so the watcher takes the queued writes together (other threads pass)."""

    def __init__(self, lock: Any, hold: threading.Event, release: threading.Event) -> None:
        self.lock, self.hold, self.release = lock, hold, release

    def __enter__(self) -> None:
        if threading.current_thread().name == "biopb-docs-watcher" and self.hold.is_set():
            self.release.wait(CHANCE)
        self.lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__(*exc)


@pytest.mark.anyio
async def test_an_index_change_seen_on_disk_stands_for_one_write_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher sees an index write on disk before it is queued and announces the index; that
    write and the next (a doc's) then reach it together. The first is not announced again; the
    second still announces the index, as every write_doc does."""
    local, shipped, ids = make_corpus(tmp_path, 2)
    mcp, store, notifier = make_server(local, shipped, poll=0.05)
    index_written, looked, doc_queued = threading.Event(), threading.Event(), threading.Event()
    read_tier, store_write, announce = store.shelf.local_state, store.write_doc, notifier.after_write

    def local_state() -> dict[str, tuple[int, int]]:
        state = read_tier()
        if index_written.is_set():
            looked.set()
        return state

    def write_doc(doc_id: str, *args: Any) -> Any:
        result = store_write(doc_id, *args)
        if doc_id == "index":
            index_written.set()
            looked.wait(CHANCE)  # a look sees the index on disk before this write is queued
        return result

    async def after_write(result: Any) -> None:
        await announce(result)
        if result.doc_id == ids[0]:
            doc_queued.set()

    monkeypatch.setattr(store.shelf, "local_state", local_state)
    monkeypatch.setattr(store, "write_doc", write_doc)
    monkeypatch.setattr(notifier, "after_write", after_write)
    monkeypatch.setattr(notifier, "_writes_lock", _HeldForWatcher(notifier._writes_lock, looked, doc_queued))
    inbox = Inbox(WAIT)
    async with Client(mcp, mode="legacy", cache=None, message_handler=inbox) as client:
        for uri in (INDEX_URI, doc_uri(ids[0]), doc_uri(ids[1])):
            await legacy_subscribe(client, uri)
        await client.call_tool("write_doc", {"id": "index", "body": f"# Docs\n\n- {ids[0]}: one\n"})
        await client.call_tool("write_doc", {"id": ids[0], "body": "# Changed\n\nBy hand of the agent.\n"})
        await until_count(inbox, INDEX_URI, 2)
        await until_count(inbox, doc_uri(ids[0]), 1)
        await watcher_looked_again(inbox, local, ids[1], 1)
        assert inbox.updated.count(INDEX_URI) == 2 and inbox.updated.count(doc_uri(ids[0])) == 1, inbox.updated


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
async def test_without_folder_watches_a_hand_edit_is_still_announced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
        await legacy_subscribe(a, doc_uri(ids[1]))
        for i in range(writes):  # sizes differ, so no two writes leave the same stamp
            await a.call_tool("write_doc", {"id": ids[0], "body": f"# Changed {i}\n\n" + "x" * i + "\n"})
        await until_count(inbox, doc_uri(ids[0]), writes)
        await watcher_looked_again(inbox, local, ids[1], 1)  # a look after all of them: none repeated
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


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("cursor", "says"),
    [
        (
            "nope",
            "Invalid cursor 'nope': a cursor is the URI of the last resource of a page (starting "
            "'biopb://docs/'); pass back the nextCursor you received, or none to start over.",
        ),
        (
            "biopb://docs/../up",
            "Invalid cursor 'biopb://docs/../up': Doc id '../up' has a '..' segment; ids cannot walk the "
            "directory tree. Pass back the nextCursor you received, or none to start over.",
        ),
    ],
)
async def test_a_bad_cursor_is_invalid_params_telling_the_client_to_pass_back_its_cursor(
    tmp_path: Path, cursor: str, says: str
) -> None:
    local, shipped, _ = make_corpus(tmp_path, 3)
    mcp, _, _ = make_server(local, shipped)
    async with Client(mcp, mode="legacy", cache=None) as client:
        with pytest.raises(MCPError) as err:
            await client.list_resources(cursor=cursor)
    assert err.value.error.code == -32602
    assert err.value.error.message == says
