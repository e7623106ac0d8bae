"""Hostile ids and paths: generated ids through the store, the tools and the URIs.

Invariant: every write lands inside the local tier or is refused with a BiopbMcpError (a tool
error / resource error over MCP) whose text says why; never a bare exception. A sentinel
directory beside the local tier, which symlinks inside the tier point into, is byte-identical
after every generated call, reads never show its content, and nothing appears outside the tier.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError
from mcp.types import TextContent

from _tests.support.rel_helpers import snapshot, write_config
from biopb_mcp.config import load_settings
from biopb_mcp.docs.ids import is_valid_id
from biopb_mcp.docs.search import search_docs
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import BiopbMcpError, InvalidDocId
from biopb_mcp.server import build_server

SECRET = "SENTINEL-SECRET-7f3a"
"""In every sentinel file: a read that shows it has leaked content from outside the tier."""

# Pieces a hostile id is assembled from: traversal, encodings, separators, drive letters, NUL,
# look-alikes (one dot leader U+2024, fullwidth solidus/full stop, division and fraction slash),
# trailing dots and spaces, the store's own hidden files, the symlinks planted in the tier, views.
FRAGMENTS = [
    "..", ".", "...", "%2e%2e", "%2E%2e", "%2f", "%5c", "%00", "\\", "/", "//", "C:\\", "C:", "c:/",
    "\x00", "\u2024\u2024", "\u2024", "\uff0f", "\uff0e\uff0e", "\u2215", "\u2044", "\u29f8", "\u202e",
    "~", " ", ".", "\t", "\n", "é", "e\u0301", "CON", "NUL", "index", "@diff", "@v1", "@v0", "@history",
    ".history", ".lock", ".shipped-manifest.json", "sentinel", "secret", "evil", "evildir", "absfile",
    "dangle", "danglingdir", "inner", "a", "b-1", "x.y_z", "_banked",
]
VALID_POOL = [
    "a", "b-1", "x.y_z", "deep/er/doc", "trailing.", "t..", "inner", "evil", "absfile", "dangle",
    "evildir/secret", "evildir/sub/deeper", "danglingdir/x", "index", "a/b", "_banked/x",
]
ID_REGEX = r"[a-z][a-z0-9_-]{0,6}(/[a-z0-9_-][a-z0-9._-]{0,6}){0,2}"

hostile_ids = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8).map("".join),
    st.text(max_size=30),
    st.integers(150, 3000).map(lambda n: "a" * n),
    st.integers(1, 400).map(lambda n: "../" * n + "sentinel/secret"),
    st.tuples(st.sampled_from(VALID_POOL), st.sampled_from([" ", ".", "..", "/", " .", ". ", "\\", "/.."])).map("".join),
    st.tuples(st.sampled_from(["/", "C:\\", "c:/", "\\\\server\\share\\", "file://"]), st.sampled_from(VALID_POOL)).map("".join),
)
"""Mostly outside the grammar: refusals are cheap, so thousands run."""

valid_ids = st.one_of(st.sampled_from(VALID_POOL), st.from_regex(ID_REGEX, fullmatch=True))
"""In the grammar (or naming a planted symlink): each success is a real, fsynced write."""

mixed_ids = st.one_of(hostile_ids, valid_ids)


def build_tier(root: Path, local: Path) -> Path:
    """A sentinel dir beside the local tier, and symlinks inside the tier pointing into it."""
    sentinel = root / "sentinel"
    (sentinel / "sub").mkdir(parents=True)
    (sentinel / "secret.md").write_text(f"# secret\n\n{SECRET}\n")
    (sentinel / "sub" / "deeper.md").write_text(f"# deeper\n\n{SECRET}\n")
    (sentinel / "index.md").write_text(f"# not your index\n\n- secret: {SECRET}\n")
    (sentinel / "notes.txt").write_bytes(b"\x00\x01binary " + SECRET.encode())
    local.mkdir(parents=True)
    (local / "a.md").write_text("# a\n\nplain local doc\n")
    os.symlink(os.path.relpath(sentinel / "secret.md", local), local / "evil.md")  # file, relative
    os.symlink(sentinel / "secret.md", local / "absfile.md")  # file, absolute
    os.symlink(os.path.relpath(sentinel, local), local / "evildir")  # directory
    os.symlink(os.path.relpath(sentinel / "new.md", local), local / "dangle.md")  # dangling file
    os.symlink(os.path.relpath(sentinel / "nodir", local), local / "danglingdir")  # dangling dir
    os.symlink("a.md", local / "inner.md")  # inside the tier: fine to read
    return sentinel


def assert_clear(exc: BaseException) -> None:
    """A refusal must be one of ours, with a message saying what is wrong."""
    assert isinstance(exc, BiopbMcpError), f"bare {type(exc).__name__}: {exc!r}"
    assert str(exc).strip(), f"{type(exc).__name__} with an empty message"
    assert "Traceback" not in str(exc)


def assert_inside(local: Path, doc_id: str) -> None:
    """After a successful write: the id is in the grammar and its file is inside the tier."""
    assert is_valid_id(doc_id), f"write to {doc_id!r} succeeded outside the id grammar"
    name = doc_id.rsplit("/", 1)[-1] + ".md"
    path = local.joinpath(*doc_id.split("/")[:-1], name)
    real = os.path.realpath(path)
    assert real.startswith(os.path.realpath(local) + os.sep), f"{doc_id!r} landed at {real}"
    assert os.path.isfile(path), f"{doc_id!r}: no file at {path}"


def test_planted_symlinks_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    local = root / "docs"
    sentinel = build_tier(root, local)
    before = snapshot(sentinel)
    store = DocStore(local)
    for doc_id in ["evil", "absfile", "dangle", "evildir/secret", "evildir/sub/deeper", "danglingdir/x"]:
        with pytest.raises(InvalidDocId, match=r"outside the docs tier|resolves outside"):
            store.write_doc(doc_id, body="# pwned\n\noverwrite\n")
        with pytest.raises(BiopbMcpError) as read_err:
            store.read_doc(doc_id)
        assert SECRET not in str(read_err.value)
    assert "plain local doc" in store.read_doc("inner")  # a link inside the tier is fine
    listed = store.doc_ids()
    assert not [i for i in listed if i.startswith(("evil", "absfile", "dangle"))], listed
    assert SECRET not in store.render_index()
    assert not [h for h in search_docs(store, SECRET.split("-")[0], 50) if SECRET in h.snippet]
    assert snapshot(sentinel) == before
    assert not (sentinel / "new.md").exists() and not (sentinel / "nodir").exists()


def test_generated_ids_through_the_store(tmp_path: Path, counts: Counter[str]) -> None:
    root = tmp_path / "t"
    local = root / "docs"
    sentinel = build_tier(root, local)
    sentinel_before = snapshot(sentinel)
    outside_before = snapshot(root, exclude=(local,))
    store = DocStore(local)
    tally: Counter[str] = Counter()

    def one(doc_id: str, body_marker: int) -> None:
        tally["ids"] += 1
        try:
            text = store.read_doc(doc_id)
        except Exception as exc:  # any type: the assertion is on it
            assert_clear(exc)
        else:
            assert SECRET not in text, f"read_doc({doc_id!r}) leaked the sentinel"
        body = f"# doc {body_marker}\n\nbody {body_marker}\n"
        try:
            store.write_doc(doc_id, body=body)
        except Exception as exc:
            assert_clear(exc)
            tally["refused"] += 1
        else:
            tally["written"] += 1
            if doc_id != "index":
                assert_inside(local, doc_id)
                assert store.doc_text(doc_id)[0] == body
        try:
            store.write_doc(doc_id, old="body", new="changed")
        except Exception as exc:
            assert_clear(exc)
        else:
            assert is_valid_id(doc_id)

    quick = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
    for strategy, n in ((hostile_ids, 2000), (valid_ids, 200)):
        run = settings(quick, max_examples=n)(lambda doc_id, body_marker: one(doc_id, body_marker))
        given(doc_id=strategy, body_marker=st.integers(0, 10**6))(run)()
    assert snapshot(sentinel) == sentinel_before, "the sentinel beside the tier changed"
    assert snapshot(root, exclude=(local,)) == outside_before, "something appeared outside the tier"
    for top, _dirs, files in os.walk(local):
        for name in files:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                assert os.path.realpath(path).startswith(os.path.realpath(local) + os.sep)
    assert tally["written"] > 0 and tally["refused"] > 0, tally  # both sides of the invariant ran
    counts["hostile ids tried (store)"] += tally["ids"]
    counts["hostile ids: writes that landed inside the tier"] += tally["written"]
    counts["hostile ids: writes refused"] += tally["refused"]


def _text(result: object) -> str:
    return "\n".join(b.text for b in getattr(result, "content", []) if isinstance(b, TextContent))


def test_generated_ids_through_mcp_tools_and_uris(tmp_path: Path, counts: Counter[str]) -> None:
    """One in-process server, real MCP session: read_doc, write_doc and resource reads per id."""
    root = tmp_path / "t"
    env = write_config(root)
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    sentinel = build_tier(root, local)
    sentinel_before = snapshot(sentinel)
    outside_before = snapshot(root, exclude=(local,))
    mcp, _state = build_server(load_settings(Path(env["BIOPB_CONFIG_DIR"])))
    tally: Counter[str] = Counter()

    with anyio.from_thread.start_blocking_portal() as portal:  # the client needs the portal
        with portal.wrap_async_context_manager(Client(mcp, mode="legacy")) as client:

            @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(doc_id=mixed_ids)
            def one(doc_id: str) -> None:
                tally["ids"] += 1
                read = portal.call(client.call_tool, "read_doc", {"id": doc_id})
                if read.is_error:
                    assert _text(read).startswith("Error executing tool read_doc: ") and len(_text(read)) > 40
                assert SECRET not in _text(read)
                write = portal.call(client.call_tool, "write_doc", {"id": doc_id, "body": "# via mcp\n\nhello\n"})
                if write.is_error:
                    tally["refused"] += 1
                    assert "Traceback" not in _text(write) and len(_text(write)) > 40, _text(write)
                else:
                    tally["written"] += 1
                    if doc_id != "index":
                        assert_inside(local, doc_id)
                try:
                    res = portal.call(client.read_resource, "biopb://docs/" + doc_id)
                except MCPError as exc:
                    tally["uri refused"] += 1
                    assert exc.error.code in (-32602, -32603), exc.error
                    assert len(exc.error.message) > 20 and "Traceback" not in exc.error.message
                    assert SECRET not in exc.error.message
                else:
                    tally["uri read"] += 1
                    assert all(SECRET not in getattr(c, "text", "") for c in res.contents)

            one()
            # The session survived every hostile call.
            assert not portal.call(client.call_tool, "read_doc", {"id": "index"}).is_error

    assert snapshot(sentinel) == sentinel_before
    assert snapshot(root, exclude=(local,)) == outside_before
    assert tally["refused"] > 0 and tally["uri refused"] > 0, tally
    counts["hostile ids tried (MCP tools + URIs)"] += tally["ids"]
