"""Hostile ids and paths: generated ids through the store, the tools and the URIs.

Invariant: every write lands inside the local tier or is refused with a BiopbMcpError (a tool
error / resource error over MCP) whose text says why; never a bare exception. A sentinel
directory beside the local tier, which symlinks inside the tier point into, is byte-identical
after every generated call, reads never show its content, and nothing appears outside the tier.
The generators and the per-id checks are ``python -m bench soak``'s, here at CI's counts.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from _tests.support.raw_server import write_config
from _tests.support.soak import hostile_ids as hostile
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.search.query import search_docs
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import BiopbMcpError, InvalidDocId
from biopb_mcp.server import build_server
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index


def test_planted_symlinks_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    local = root / "docs"
    sentinel = hostile.build_tier(root, local)
    before = hostile.snapshot(sentinel)
    store = DocStore(local)
    for doc_id in ["evil", "absfile", "dangle", "evildir/secret", "evildir/sub/deeper", "danglingdir/x"]:
        with pytest.raises(InvalidDocId, match=r"outside the docs tier|resolves outside"):
            store.write_doc(doc_id, body="# pwned\n\noverwrite\n")
        with pytest.raises(BiopbMcpError) as read_err:
            read_doc(store, doc_id)
        assert hostile.SECRET not in str(read_err.value)
    assert "plain local doc" in read_doc(store, "inner")  # a link inside the tier is fine
    listed = store.shelf.doc_ids()
    assert not [i for i in listed if i.startswith(("evil", "absfile", "dangle"))], listed
    assert hostile.SECRET not in render_index(store)
    assert not [h for h in search_docs(store, hostile.SECRET.split("-")[0], 50) if hostile.SECRET in h.snippet]
    assert hostile.snapshot(sentinel) == before
    assert not (sentinel / "new.md").exists() and not (sentinel / "nodir").exists()


def test_generated_ids_through_the_store(tmp_path: Path, counts: Counter[str]) -> None:
    root = tmp_path / "t"
    local = root / "docs"
    sentinel = hostile.build_tier(root, local)
    sentinel_before = hostile.snapshot(sentinel)
    outside_before = hostile.snapshot(root, exclude=(local,))
    store = DocStore(local)
    tally: Counter[str] = Counter()

    def one(doc_id: str, body_marker: int) -> None:
        problems = hostile.store_id_round(store, local, doc_id, body_marker, tally)
        assert not problems, problems

    quick = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
    for strategy, n in ((hostile.hostile_ids, 2000), (hostile.valid_ids, 200)):
        run = settings(quick, max_examples=n)(lambda doc_id, body_marker: one(doc_id, body_marker))
        given(doc_id=strategy, body_marker=st.integers(0, 10**6))(run)()
    assert not hostile.escapes_after(local, sentinel, sentinel_before, root, outside_before)
    assert tally["written"] > 0 and tally["refused"] > 0, tally  # both sides of the invariant ran
    counts["hostile ids tried (store)"] += tally["ids"]
    counts["hostile ids: writes that landed inside the tier"] += tally["written"]
    counts["hostile ids: writes refused"] += tally["refused"]


def test_generated_ids_through_mcp_tools_and_uris(tmp_path: Path, counts: Counter[str]) -> None:
    """One in-process server, real MCP session: read_doc, write_doc and resource reads per id."""
    root = tmp_path / "t"
    env = write_config(root)
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    sentinel = hostile.build_tier(root, local)
    sentinel_before = hostile.snapshot(sentinel)
    outside_before = hostile.snapshot(root, exclude=(local,))
    mcp, _state = build_server(load_settings(Path(env["BIOPB_CONFIG_DIR"])))
    tally: Counter[str] = Counter()

    with anyio.from_thread.start_blocking_portal() as portal:  # nested: the client needs the portal
        with portal.wrap_async_context_manager(Client(mcp, mode="legacy")) as client:

            @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(doc_id=hostile.mixed_ids)
            def one(doc_id: str) -> None:
                problems = portal.call(hostile.mcp_id_round, client, local, doc_id, tally)
                assert not problems, problems

            one()
            # The session survived every hostile call.
            assert not portal.call(client.call_tool, "read_doc", {"id": "index"}).is_error

    assert not hostile.escapes_after(local, sentinel, sentinel_before, root, outside_before)
    assert tally["refused"] > 0 and tally["uri refused"] > 0, tally
    counts["hostile ids tried (MCP tools + URIs)"] += tally["ids"]
