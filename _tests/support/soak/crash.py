"""Crash injection: SIGKILL a writer in the middle of write_doc, then check what the tier holds.

A writer rewrites a ~0.9 MB doc and creates docs (each create appends to the index) until it is
killed at a random moment. Afterwards the doc is exactly one whole text that was written, the
index is exactly the text before or after some number of appends, every created doc is whole, no
index line points at a missing doc, and no leftover temp file is surfaced as a doc (ids, rendered
index, resource listing, search). The reliability tests run a few dozen rounds; the soak, a
thousand.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import time
from pathlib import Path
from random import Random

from _tests.support.raw_server import RawServer
from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.frontmatter import parse
from biopb_mcp.docs.resources import walk
from biopb_mcp.docs.search.query import search_docs
from biopb_mcp.docs.store import DocStore
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index

__all__ = [
    "CRASH_LINES",
    "Problem",
    "TierCheck",
    "big_body",
    "created_body",
    "fork_writer",
    "index_states",
    "kill_server_mid_write",
    "kill_store_writer",
    "store_writer",
]

CRASH_LINES = 290
"""Lines of the big body: under the 300-line cap, about 0.9 MB, so a write spans many blocks."""

_VERSION = re.compile(r"^version (\S+)$", re.MULTILINE)

Problem = tuple[str, str]
"""(kind, what): kind is "torn", "lost" or "surfaced"."""


def big_body(tag: str) -> str:
    """A large doc body whose every line carries ``tag``: a torn file cannot pass for a whole one."""
    line = ("lorem ipsum " * 250) + f"{tag}\n"
    return f"# big\n\nversion {tag}\n\n" + line * CRASH_LINES


def created_body(doc_id: str) -> str:
    return f"# Created {doc_id}\n\nA doc created by the crash test, {doc_id}.\n"


def store_writer(local: str, seed: int, creates: int, ready_fd: int) -> None:
    """Child-process body for crash injection: write the big doc and create docs until killed."""
    store = DocStore(Path(local))
    read_doc(store, "index")  # seed the index before the parent starts the clock
    os.write(ready_fd, b"r")
    k = 0
    while True:
        store.write_doc("big", body=big_body(f"{seed}-{k}"))
        if k < creates:
            doc_id = f"c-{seed}-{k}"
            store.write_doc(doc_id, body=created_body(doc_id))
        k += 1


def fork_writer(local: str, seed: int, creates: int, timeout: float = 60.0) -> int:
    """Fork a child running ``store_writer``; return its pid once it is about to write.

    A plain fork: the modules are already imported, so a round costs milliseconds (spawn or
    forkserver would re-import the caller's main module in every child).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into the caller
        try:
            os.close(r)
            store_writer(local, seed, creates, w)
        finally:
            os._exit(3)
    os.close(w)
    try:
        sel = selectors.DefaultSelector()
        sel.register(r, selectors.EVENT_READ)
        if not sel.select(timeout) or os.read(r, 1) != b"r":
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise RuntimeError("the writer child never started")
        sel.close()
    finally:
        os.close(r)
    return pid


def index_states(before: str, created: list[str]) -> list[str]:
    """The index after 0, 1, 2, … of the creates, computed as the store appends them."""
    states = [before]
    for doc_id in created:
        info = parse(created_body(doc_id))
        hook = info.description or info.title or doc_id
        states.append(index_mod.append_unfiled(states[-1], index_mod.entry_line(doc_id, hook)))
    return states


class TierCheck:
    """What a tier may hold after a crash, and the checks that it holds nothing else."""

    def __init__(self, local: Path) -> None:
        self.local = local
        self.created: set[str] = set()
        self.stray_temp_files = 0
        self._shipped = set(DocStore(local, read_only=True).shelf.shipped_ids())

    def check(self, before_index: str, orders: list[list[str]], *, surfaces: bool = True) -> tuple[str, list[Problem]]:
        """Check the tier after a kill; (the index text, the next round's 'before'; the problems).

        ``orders``: the round's creates in each order they may have run in (one order for one writer).
        """
        local = self.local
        problems: list[Problem] = []
        big = local / "big.md"
        if big.exists():
            text = big.read_text()
            match = _VERSION.search(text)
            if match is None:
                problems.append(("torn", "big.md lost its version line"))
            elif text != big_body(match.group(1)):
                problems.append(("torn", "big.md is not one whole text that was written"))
        index_text = (local / "index.md").read_text()
        appended: list[str] | None = None
        for order in orders:
            states = index_states(before_index, order)
            if index_text in states:
                appended = order[: states.index(index_text)]
                break
        if appended is None:
            problems.append(("torn", "index.md is neither the old text nor one of the appends"))
            appended = []
        for doc_id in sorted({d for order in orders for d in order}):
            path = local / f"{doc_id}.md"
            if path.exists():
                if path.read_text() != created_body(doc_id):
                    problems.append(("torn", f"{doc_id} is torn"))
                self.created.add(doc_id)
        # A create is doc first, then index line: a crash between leaves an unindexed doc, never an
        # index line pointing at a doc that was never written.
        for doc_id in appended:
            if not (local / f"{doc_id}.md").exists():
                problems.append(("lost", f"index lists {doc_id} but the doc is missing"))
        self.stray_temp_files = len(list(local.rglob(".*.tmp")))
        store = DocStore(local)
        ids = set(store.shelf.doc_ids())
        odd = [i for i in ids if "tmp" in i or i.startswith(".")]
        odd += sorted(ids - {"big"} - self.created - self._shipped)
        problems += [("surfaced", f"doc id {i!r} listed") for i in odd]
        if surfaces:
            problems += self.check_surfaces(store)
        return index_text, problems

    def check_surfaces(self, store: DocStore) -> list[Problem]:
        """Leftover temp files appear in no listing: rendered index, resources, search."""
        problems: list[Problem] = []
        rendered = render_index(store)
        if ".tmp" in rendered or ".big" in rendered:
            problems.append(("surfaced", "a temp file in the rendered index"))
        problems += [("surfaced", f"resource {e.uri}") for e in walk(store) if "tmp" in e.uri or "/." in e.uri]
        problems += [
            ("surfaced", f"search hit {hit.doc_id}")
            for hit in search_docs(store, "lorem ipsum", 50)
            if hit.doc_id != "big"
        ]
        return problems


def kill_store_writer(local: Path, seed: int, creates: int, rng: Random, max_delay: float) -> list[str]:
    """One round: fork a store writer, SIGKILL it after a random delay; the ids it may have created."""
    pid = fork_writer(str(local), seed, creates)
    time.sleep(rng.uniform(0.0, max_delay))
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        raise RuntimeError(f"writer ended on its own: {status}")
    return [f"c-{seed}-{k}" for k in range(creates)]


def kill_server_mid_write(
    env: dict[str, str], stderr: Path, tag: str, rng: Random, max_delay: float
) -> list[list[str]]:
    """One round through the real server: pipeline a big write and two creates, SIGKILL it mid-way.

    Returns the creates in both orders: they run on worker threads and may take the lock in either.
    """
    server = RawServer(env, stderr)
    try:
        server.initialize()
        # Tell an old big doc apart from a new one: the same id every round, a new text each time.
        server.request("tools/call", {"name": "write_doc", "arguments": {"id": "big", "body": big_body(tag)}})
        created = [f"c-{tag}-{k}" for k in range(2)]
        for doc_id in created:
            server.request(
                "tools/call", {"name": "write_doc", "arguments": {"id": doc_id, "body": created_body(doc_id)}}
            )
        time.sleep(rng.uniform(0.0, max_delay))
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(30)
        if server.proc.returncode != -signal.SIGKILL:
            raise RuntimeError(f"server ended on its own: {server.proc.returncode}")
    finally:
        server.close()
    return [created, created[::-1]]
