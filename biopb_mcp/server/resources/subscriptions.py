"""Docs change notifications to resource subscribers, in both protocol eras.

* Legacy (handshake) era: ``resources/subscribe``/``unsubscribe`` with per-connection tracking
  dropped on disconnect, and ``listChanged: true`` patched into the ``initialize`` result.
* Modern (2026-07-28) era: events published on the bus reach ``subscriptions/listen`` streams.
* A watcher, while anyone is subscribed, so edits by hand or by another server process (one per
  agent host under stdio) are announced too: it reads the store's change feed (inotify, shared
  with search) and compares ``store.local_state()`` snapshots only when the feed reports a change
  in the local tier (every look, where folders cannot be watched).

Notifications are cues to refetch, never payloads. Each change is announced once, whoever made
it: while the watcher runs, a write_doc hands its URIs to the watcher and wakes it, and the
watcher leaves out of its next look at the disk what the writes already announced.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    SubscriptionBus,
)
from mcp.types import (
    INVALID_PARAMS,
    EmptyResult,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

from biopb_mcp.docs.changes import Cursor
from biopb_mcp.docs.ids import INDEX_ID
from biopb_mcp.docs.resources import INDEX_URI, URI_PREFIX, doc_uri
from biopb_mcp.docs.store import DocStore, WriteResult
from biopb_mcp.errors import DocError
from biopb_mcp.fs.watch import WatchUnavailable
from biopb_mcp.server.sdk import session_connection

logger = logging.getLogger(__name__)

__all__ = ["POLL_INTERVAL", "DocNotifier", "changes"]

POLL_INTERVAL = 1.0
"""Seconds between two looks at the local tier while anyone is subscribed (1–2 s: soon enough for a person editing by hand, cheap on disk)."""

PROMPTS_SETTLE_S = 0.2
"""Seconds without a write before the prompt set is looked at again: a burst of writes costs one
look, taken after it rather than beside each write."""

PROMPTS_LATEST_S = 1.0
"""Seconds after a burst's first write by which the prompt set is looked at even if writes go on."""

CallNext = Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]]
Snapshot = dict[str, tuple[int, int]]


def _check_uri(uri: str) -> None:
    """Refuse a subscription to something that is not a docs resource (it could never fire)."""
    if not uri.startswith(URI_PREFIX) or uri == URI_PREFIX:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Cannot subscribe to {uri!r}: only {INDEX_URI} and biopb://docs/<id> resources change here.",
        )


class DocNotifier:
    """Sends ``resources/updated`` and ``resources/list_changed`` to every subscriber, both eras.

    Legacy state lives here per connection (``ServerSession._connection``, the SDK's only stable
    per-connection handle) and is dropped by the connection's exit stack on disconnect. Modern
    listeners are counted in the middleware for as long as their listen stream is open. All of
    it is touched only on the event loop; the watcher thread hands its findings back to the loop.
    """

    def __init__(self, store: DocStore, bus: SubscriptionBus, *, poll_interval: float = POLL_INTERVAL) -> None:
        self.store = store
        self.bus = bus
        self.poll_interval = poll_interval
        self._sessions: dict[object, ServerSession] = {}  # legacy connection -> its session
        self._subs: dict[object, set[str]] = {}  # legacy connection -> subscribed URIs
        self._listens = 0  # open modern listen streams
        self._stop: threading.Event | None = None  # set to stop the running watcher
        self._wake = threading.Event()  # set to make the running watcher look now
        self._writes: list[Written] = []  # writes the watcher announces
        self._writes_lock = threading.Lock()
        self.prompts_changed: Callable[[], bool] | None = None
        """Whether the prompt set differs from the one last read (blocking: it reads docs).
        Asked after each change announced (a write, or what the watcher found on disk), off the
        event loop; True sends ``prompts/list_changed``."""
        self._prompts_lock = threading.Lock()
        self._prompts_due: float | None = None  # when the prompt set is next looked at
        self._prompts_deadline = 0.0  # the latest it may be put off to, set by a burst's first write
        self._prompts_worker: threading.Thread | None = None

    # -- publishing ---------------------------------------------------------------------------

    async def after_write(self, result: WriteResult) -> None:
        """Announce a successful write_doc: the index and the doc changed; a create grows the list."""
        if not result.changed and not result.created:
            return
        # dict.fromkeys: write_doc("index") is the index's own URI, announced once.
        uris = list(dict.fromkeys([INDEX_URI, doc_uri(result.doc_id)]))
        if self.watching:  # the watcher would see this change on disk too: it alone announces it
            # the files the write changed: the index only when it wrote it or added a line to it (an
            # index stamp it left alone would match what a look told of another change)
            written = self._stamps([INDEX_ID, result.doc_id] if result.created else [result.doc_id])
            with self._writes_lock:
                self._writes.append(Written(uris, result.created, written))
            self._wake.set()
            return
        await self.notify_updated(uris)
        if result.created:
            await self.notify_list_changed()
        if self.prompts_changed is not None:
            self._check_prompts_later(anyio.lowlevel.current_token())

    def _check_prompts_later(self, token: Any) -> None:
        """Whether writes changed the prompt set is found off the call's path, once a burst of
        writes has settled (at most ``PROMPTS_LATEST_S`` after its first write): it reads every
        listed doc, which beside the next write would slow it."""
        with self._prompts_lock:
            now = time.monotonic()
            if self._prompts_due is None:
                self._prompts_deadline = now + PROMPTS_LATEST_S
            self._prompts_due = min(now + PROMPTS_SETTLE_S, self._prompts_deadline)
            if self._prompts_worker is not None:
                return
            self._prompts_worker = worker = threading.Thread(
                target=self._prompts_loop, args=(token,), name="biopb-prompts-check", daemon=True
            )
        worker.start()

    def _prompts_loop(self, token: Any) -> None:
        try:
            while True:
                with self._prompts_lock:
                    due = self._prompts_due
                    if due is None:
                        return
                    wait = due - time.monotonic()
                    if wait <= 0:
                        self._prompts_due = None
                if wait > 0:
                    time.sleep(wait)
                    continue
                if not self._prompts_changed():
                    continue
                try:
                    anyio.from_thread.run(self.notify_prompts_changed, token=token)
                except RuntimeError:  # the event loop is gone: the server stopped
                    return
                except Exception:  # one lost notice must not end the checks
                    logger.warning("docs: could not announce that the prompts changed", exc_info=True)
        finally:
            with self._prompts_lock:
                self._prompts_worker = None

    def _stamps(self, doc_ids: list[str]) -> Snapshot:
        """What ``local_state`` shows for these ids now (a file missing is left out)."""
        found: Snapshot = {}
        for doc_id in dict.fromkeys(doc_ids):
            path = self.store.local_file(doc_id)
            try:
                st = os.stat(path)
            except (OSError, DocError):
                continue
            found[doc_id] = (st.st_mtime_ns, st.st_size)
        return found

    def _prompts_changed(self) -> bool:
        """``prompts_changed()``, a failure logged as no change (a docs problem must not fail the write)."""
        if self.prompts_changed is None:
            return False
        try:
            return self.prompts_changed()
        except (OSError, DocError):
            logger.warning("docs: cannot tell whether the prompts changed", exc_info=True)
            return False

    async def notify_prompts_changed(self) -> None:
        """``prompts/list_changed`` to listen streams and every legacy session."""
        await self.bus.publish(PromptsListChanged())
        for session in list(self._sessions.values()):
            await _send(session.send_prompt_list_changed())

    async def notify_updated(self, uris: list[str]) -> None:
        """``resources/updated`` for each URI, to listen streams and subscribed legacy sessions."""
        for uri in uris:
            await self.bus.publish(ResourceUpdated(uri=uri))
            for conn, subs in list(self._subs.items()):
                if uri in subs and (session := self._sessions.get(conn)) is not None:
                    await _send(session.send_resource_updated(uri))

    async def notify_list_changed(self) -> None:
        """``resources/list_changed`` to listen streams and every legacy session."""
        await self.bus.publish(ResourcesListChanged())
        for session in list(self._sessions.values()):
            await _send(session.send_resource_list_changed())

    # -- legacy subscriptions -----------------------------------------------------------------

    def _track(self, session: ServerSession) -> object:
        conn = session_connection(session)
        if conn not in self._sessions:
            self._sessions[conn] = session
            self._subs[conn] = set()
            conn.exit_stack.callback(self._forget, conn)
        return conn

    def _forget(self, conn: object) -> None:
        self._sessions.pop(conn, None)
        self._subs.pop(conn, None)
        self._update_watcher_demand()

    async def subscribe(self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        """``resources/subscribe`` (handshake era)."""
        _check_uri(params.uri)
        conn = self._track(ctx.session)
        self._subs[conn].add(params.uri)
        await self._start_watcher()
        return EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        """``resources/unsubscribe`` (handshake era); an unknown URI is a no-op: there is nothing to undo."""
        conn = self._track(ctx.session)
        self._subs[conn].discard(params.uri)
        self._update_watcher_demand()
        return EmptyResult()

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        """Patch legacy ``listChanged``, track legacy sessions, count modern listen streams."""
        if ctx.method == "subscriptions/listen":
            # The call lasts as long as the stream: count it while open, watch the disk meanwhile.
            self._listens += 1
            try:
                await self._start_watcher()
                return await call_next(ctx)
            finally:
                self._listens -= 1
                self._update_watcher_demand()
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            caps = result.setdefault("capabilities", {})
            caps.setdefault("resources", {})["listChanged"] = True  # the SDK advertises False
            self._track(ctx.session)  # so list_changed reaches every legacy client
        return result

    # -- the watcher --------------------------------------------------------------------------

    def _demand(self) -> int:
        return self._listens + sum(1 for subs in self._subs.values() if subs)

    def _update_watcher_demand(self) -> None:
        """Stop the watcher once nobody is subscribed (starting needs a baseline: ``_start_watcher``)."""
        if self._demand() == 0 and self._stop is not None:
            self._stop.set()
            self._wake.set()
            self._stop = None

    @property
    def watching(self) -> bool:
        """True while the watcher runs (someone is subscribed)."""
        return self._stop is not None

    async def _start_watcher(self) -> None:
        """Start polling the local tier, baseline taken before the subscriber hears back.

        A thread, not a task: install_resources owns no task group that outlives a request, and
        the thread needs none. It hands changes back to this event loop by token.
        """
        if self._stop is not None or self._demand() == 0:
            return
        stop = threading.Event()
        self._stop = stop  # claimed before the await, so concurrent subscribers start one watcher
        self._wake = wake = threading.Event()
        # Shielded: a subscribe cancelled half way must not leave the watcher claimed but never started.
        with anyio.CancelScope(shield=True):
            # Followed before the baseline is taken: a change after the baseline is in the feed.
            cursor = await anyio.to_thread.run_sync(self._follow)
            try:
                baseline = await anyio.to_thread.run_sync(self.store.local_state)
            except (OSError, DocError):
                logger.warning(
                    "docs watcher: cannot read the local tier; watching from an empty baseline", exc_info=True
                )
                baseline = {}
        token = anyio.lowlevel.current_token()
        thread = threading.Thread(
            target=self._watch, args=(stop, wake, baseline, token, cursor), name="biopb-docs-watcher", daemon=True
        )
        thread.start()

    def _follow(self) -> Cursor | None:
        """A place in the store's change feed following every folder of the local tier; None
        where folders cannot be watched (then each look walks the tier)."""
        cursor = self.store.follow_changes()
        if self._refollow(cursor):
            return cursor
        cursor.close()
        return None

    def _refollow(self, cursor: Cursor) -> bool:
        local = os.fspath(self.store.local_dir)
        _files, folders, linked = self.store.list_inputs()
        if linked:  # where a link leads is not watched: walk the tier at each look
            return False
        try:
            cursor.watch([f for f in folders if f == local or f.startswith(local + os.sep)])
        except WatchUnavailable as exc:
            logger.info(
                "docs watcher walks the local tier every %.1f s: cannot watch its folders (%s)", self.poll_interval, exc
            )
            return False
        return True

    def _watch(
        self, stop: threading.Event, wake: threading.Event, snapshot: Snapshot, token: Any, cursor: Cursor | None
    ) -> None:
        """Thread body: look every ``poll_interval`` (at once when a write wakes it) and hand each
        write's URIs, then what else differs on disk, to the event loop. A look walks the tier
        only when the change feed reports something there (or cannot watch it)."""
        logger.debug("docs watcher started (every %.1fs)", self.poll_interval)
        try:
            self._watch_loop(stop, wake, snapshot, token, cursor)
        finally:
            if cursor is not None:
                cursor.close()
        logger.debug("docs watcher stopped")

    def _watch_loop(
        self, stop: threading.Event, wake: threading.Event, snapshot: Snapshot, token: Any, cursor: Cursor | None
    ) -> None:
        told: Snapshot = {}  # the latest change of each id announced from the disk alone: a write's
        # entry arriving after its change was seen there (however many looks later) is not announced again
        while True:
            wake.wait(self.poll_interval)
            wake.clear()
            if stop.is_set():
                break
            if cursor is not None:
                seen = cursor.take()
                with self._writes_lock:
                    quiet = not self._writes
                if quiet and seen.complete and not seen.paths and not seen.folders:
                    continue  # nothing happened in the tier: no walk
                if seen.folders or not seen.complete:  # a folder came or went: follow the new set
                    if not self._refollow(cursor):
                        cursor.close()
                        cursor = None
            # The writes first, then the walk: every write taken has landed before the walk, so the
            # walk shows its change (or a later one), never an older state.
            with self._writes_lock:
                taken, self._writes = self._writes, []
            try:
                current = self.store.local_state()
            except (OSError, DocError):
                logger.warning("docs watcher: cannot read the local tier; trying again", exc_info=True)
                with self._writes_lock:
                    self._writes[:0] = taken  # announced at the next look
                continue
            writes = []
            for entry in taken:
                # a write whose change this watcher already announced from the disk: not twice
                fresh = [uri for uri in entry.uris if not _told(uri, entry.stamps, told)]
                if fresh:
                    writes.append((fresh, entry.created))
                # the write announces its own change: the diff below must not repeat it
                snapshot = {**snapshot, **{i: st for i, st in entry.stamps.items() if current.get(i) == st}}
            uris, list_changed = changes(snapshot, current)
            snapshot = current
            announced = {uri for group, _ in writes for uri in group}
            others = [uri for uri in uris if uri not in announced]
            told.update({i: current[i] for i in _ids(others) if i in current})  # announced from the disk alone
            if writes or others:
                list_changed = list_changed and not any(created for _, created in writes)
            if not (writes or others) or stop.is_set():
                continue
            # Read here, in this thread: the event loop then only sends, and a server stopping
            # under the watcher never has a worker thread of it in flight.
            prompts = self._prompts_changed()
            try:
                anyio.from_thread.run(self._publish_changes, writes, others, list_changed, prompts, token=token)
            except RuntimeError:  # the event loop is gone: the server stopped under us
                logger.debug("docs watcher: event loop closed; stopping")
                return
            except Exception:  # thread boundary: a failed fan-out must not kill the watcher silently
                logger.exception("docs watcher: announcing changes failed; watching on")

    async def _publish_changes(
        self, writes: list[tuple[list[str], bool]], others: list[str], list_changed: bool, prompts: bool = False
    ) -> None:
        for uris, created in writes:  # each write as it would have announced itself
            await self.notify_updated(uris)
            if created:
                await self.notify_list_changed()
        if others:
            logger.info("docs changed on disk: %s", ", ".join(others))
            await self.notify_updated(others)
        if list_changed:
            await self.notify_list_changed()
        if prompts:
            await self.notify_prompts_changed()


@dataclass(frozen=True)
class Written:
    """A write_doc the watcher announces: its URIs, whether it created a doc, and what
    ``local_state`` showed for the files it wrote right after (so neither the diff nor a later
    entry announces the same change again)."""

    uris: list[str]
    created: bool
    stamps: Snapshot


def _id_of(uri: str) -> str:
    return INDEX_ID if uri == INDEX_URI else uri.removeprefix(URI_PREFIX)


def _ids(uris: list[str]) -> list[str]:
    return [_id_of(uri) for uri in uris]


def _told(uri: str, stamps: Snapshot, told: Snapshot) -> bool:
    """Whether the disk's change a write made at ``uri`` was announced already."""
    doc_id = _id_of(uri)
    return doc_id in stamps and told.get(doc_id) == stamps[doc_id]


def changes(old: Snapshot, new: Snapshot) -> tuple[list[str], bool]:
    """What two ``local_state`` snapshots differ by: URIs to announce, and whether the list changed.

    A changed doc is announced by its URI. The index is announced when its file changed or a doc
    appeared or vanished (entries flip to and from "(missing)"), and those also change the listing.
    """
    changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    if not changed:
        return [], False
    list_changed = "index" in changed or old.keys() != new.keys()
    uris = [doc_uri(k) for k in sorted(changed) if k != "index"]
    if list_changed:
        uris.insert(0, INDEX_URI)
    return uris, list_changed


async def _send(notification: Awaitable[None]) -> None:
    """Deliver one legacy notification; a connection closing under us is not an error."""
    try:
        await notification
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        logger.debug("legacy session closed before a docs notification reached it")
