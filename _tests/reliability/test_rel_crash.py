"""Crash injection: SIGKILL in the middle of write_doc, over and over.

Each round kills a writer at a random moment while it writes a ~0.9 MB doc and creates docs (each
create appends to the index), then checks the tier: the doc is exactly one whole text that was
written, the index is exactly the text before or after some number of appends, every created doc
is whole, and no leftover temp file is surfaced as a doc (ids, rendered index, resource listing,
search). Most rounds drive a DocStore in a forked child (cheap to start); a few go through the
real server over stdio.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections import Counter
from pathlib import Path

from _tests.support.rel_helpers import big_body, created_body, fork_writer, write_config
from _tests.support.stdio_procs import RawServer
from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.frontmatter import parse
from biopb_mcp.docs.resources import walk
from biopb_mcp.docs.search import search_docs
from biopb_mcp.docs.store import DocStore

STORE_ROUNDS = 30
SERVER_ROUNDS = 4
CREATES_PER_ROUND = 3
_VERSION = re.compile(r"^version (\S+)$", re.MULTILINE)


def index_states(before: str, created: list[str]) -> list[str]:
    """The index after 0, 1, 2, … of the creates, computed as the store appends them."""
    states = [before]
    for doc_id in created:
        body = created_body(doc_id)
        info = parse(body)
        hook = info.description or info.title or doc_id
        states.append(index_mod.append_unfiled(states[-1], index_mod.entry_line(doc_id, hook)))
    return states


class Tier:
    """What a tier may hold after a crash, and the checks that it holds nothing else."""

    def __init__(self, local: Path) -> None:
        self.local = local
        self.created: set[str] = set()
        self.stray_temp_files = 0

    def check(self, before_index: str, round_creates: list[str], *, surfaces: bool = True) -> str:
        """Check the tier after a kill; return the index text (the next round's 'before')."""
        local = self.local
        big = local / "big.md"
        if big.exists():
            text = big.read_text()
            match = _VERSION.search(text)
            assert match is not None, "big.md lost its version line: torn"
            assert text == big_body(match.group(1)), "big.md is not one whole text that was written"
        index_text = (local / "index.md").read_text()
        states = index_states(before_index, round_creates)
        assert index_text in states, "index.md is neither the old text nor one of the appends"
        appended = states.index(index_text)
        for doc_id in round_creates:
            path = local / f"{doc_id}.md"
            if path.exists():
                assert path.read_text() == created_body(doc_id), f"{doc_id} is torn"
                self.created.add(doc_id)
        # A create is doc first, then index line: a crash between leaves an unindexed doc, never an
        # index line pointing at a doc that was never written.
        for doc_id in round_creates[:appended]:
            assert (local / f"{doc_id}.md").exists(), f"index lists {doc_id} but the doc is missing"
        self.stray_temp_files = len([p for p in local.rglob(".*.tmp")])
        store = DocStore(local)
        ids = set(store.doc_ids())
        assert not [i for i in ids if "tmp" in i or i.startswith(".")], ids
        assert ids - {"big"} - self.created <= set(DocStore(local / "none").doc_ids()), ids
        if surfaces:
            self.check_surfaces(store)
        return index_text

    def check_surfaces(self, store: DocStore) -> None:
        """Leftover temp files appear in no listing: rendered index, resources, search."""
        rendered = store.render_index()
        assert ".tmp" not in rendered and ".big" not in rendered
        assert not [e.uri for e in walk(store) if "tmp" in e.uri or "/." in e.uri]
        for hit in search_docs(store, "lorem ipsum", 50):
            assert hit.doc_id == "big", hit


def test_sigkill_a_store_writer_mid_write(tmp_path: Path, counts: Counter[str]) -> None:
    local = tmp_path / "docs"
    tier = Tier(local)
    DocStore(local).write_doc("big", body=big_body("init"))  # so every later write replaces it
    before_index = (local / "index.md").read_text()
    rng = random.Random(8)
    injections = 0
    for seed in range(STORE_ROUNDS):
        pid = fork_writer(str(local), seed, CREATES_PER_ROUND)
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"writer ended on its own: {status}"
        injections += 1
        created = [f"c-{seed}-{k}" for k in range(CREATES_PER_ROUND)]
        before_index = tier.check(before_index, created, surfaces=seed % 5 == 4)
    tier.check_surfaces(DocStore(local))
    counts["crash injections (SIGKILL, store writer)"] += injections
    counts["crash: stray temp files left in the tier (never surfaced)"] += tier.stray_temp_files


def test_sigkill_the_server_mid_write_doc(tmp_path: Path, counts: Counter[str]) -> None:
    env = write_config(tmp_path)
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    tier = Tier(local)
    DocStore(local).write_doc("big", body=big_body("init"))
    before_index = (local / "index.md").read_text()
    rng = random.Random(9)
    injections = 0
    for r in range(SERVER_ROUNDS):
        server = RawServer(env, tmp_path / f"stderr-{r}.log")
        try:
            server.initialize()
            # Tell an old big doc apart from a new one: the same id every round, a new text each time.
            server.request("tools/call", {"name": "write_doc", "arguments": {"id": "big", "body": big_body(f"srv-{r}")}})
            created = [f"c-srv-{r}-{k}" for k in range(2)]
            for doc_id in created:
                server.request("tools/call", {"name": "write_doc", "arguments": {"id": doc_id, "body": created_body(doc_id)}})
            time.sleep(rng.uniform(0.0, 0.3))
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(30)
            assert server.proc.returncode == -signal.SIGKILL
            injections += 1
        finally:
            server.close()
        # The two creates run on worker threads and may take the lock in either order.
        index_text = (local / "index.md").read_text()
        candidates = {s for order in (created, created[::-1]) for s in index_states(before_index, order)}
        assert index_text in candidates, "index.md is torn after killing the server"
        for doc_id in created:
            path = local / f"{doc_id}.md"
            if path.exists():
                assert path.read_text() == created_body(doc_id), f"{doc_id} is torn"
                tier.created.add(doc_id)
        before_index = tier.check(index_text, [])
    counts["crash injections (SIGKILL, real server)"] += injections
    counts["crash: stray temp files left in the tier (never surfaced)"] += tier.stray_temp_files

