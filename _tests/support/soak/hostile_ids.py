"""Hostile ids and paths: the generators, the planted tier, and the checks of one id's round.

Invariant: every write lands inside the local tier or is refused with a BiopbMcpError (a tool
error / resource error over MCP) whose text says why; never a bare exception. A sentinel
directory beside the local tier, which symlinks inside the tier point into, is byte-identical
after every generated call, reads never show its content, and nothing appears outside the tier.
The reliability tests run these at CI scale under hypothesis; ``python -m bench soak`` draws
thousands from the same strategies and counts what breaks instead of stopping at the first.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from biopb_mcp.docs.ids import is_valid_id
from biopb_mcp.errors import BiopbMcpError
from biopb_mcp.text.doc_views import read_doc

__all__ = [
    "SECRET",
    "build_tier",
    "draw",
    "hostile_ids",
    "landing_problem",
    "mcp_id_round",
    "mixed_ids",
    "refusal_problem",
    "snapshot",
    "store_id_round",
    "valid_ids",
]

SECRET = "SENTINEL-SECRET-7f3a"
"""In every sentinel file: a read that shows it has leaked content from outside the tier."""

# Pieces a hostile id is assembled from: traversal, encodings, separators, drive letters, NUL,
# look-alikes (one dot leader U+2024, fullwidth solidus/full stop, division and fraction slash),
# trailing dots and spaces, the store's own hidden files, the symlinks planted in the tier, views.
FRAGMENTS = [
    "..",
    ".",
    "...",
    "%2e%2e",
    "%2E%2e",
    "%2f",
    "%5c",
    "%00",
    "\\",
    "/",
    "//",
    "C:\\",
    "C:",
    "c:/",
    "\x00",
    "\u2024\u2024",
    "\u2024",
    "\uff0f",
    "\uff0e\uff0e",
    "\u2215",
    "\u2044",
    "\u29f8",
    "\u202e",
    "~",
    " ",
    ".",
    "\t",
    "\n",
    "é",
    "e\u0301",
    "CON",
    "NUL",
    "index",
    "@diff",
    "@v1",
    "@v0",
    "@history",
    ".history",
    ".lock",
    ".shipped-manifest.json",
    "sentinel",
    "secret",
    "evil",
    "evildir",
    "absfile",
    "dangle",
    "danglingdir",
    "inner",
    "a",
    "b-1",
    "x.y_z",
    "_banked",
]
VALID_POOL = [
    "a",
    "b-1",
    "x.y_z",
    "deep/er/doc",
    "trailing.",
    "t..",
    "inner",
    "evil",
    "absfile",
    "dangle",
    "evildir/secret",
    "evildir/sub/deeper",
    "danglingdir/x",
    "index",
    "a/b",
    "_banked/x",
]
ID_REGEX = r"[a-z][a-z0-9_-]{0,6}(/[a-z0-9_-][a-z0-9._-]{0,6}){0,2}"

hostile_ids = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8).map("".join),
    st.text(max_size=30),
    st.integers(150, 3000).map(lambda n: "a" * n),
    st.integers(1, 400).map(lambda n: "../" * n + "sentinel/secret"),
    st.tuples(st.sampled_from(VALID_POOL), st.sampled_from([" ", ".", "..", "/", " .", ". ", "\\", "/.."])).map(
        "".join
    ),
    st.tuples(st.sampled_from(["/", "C:\\", "c:/", "\\\\server\\share\\", "file://"]), st.sampled_from(VALID_POOL)).map(
        "".join
    ),
)
"""Mostly outside the grammar: refusals are cheap, so thousands run."""

valid_ids = st.one_of(st.sampled_from(VALID_POOL), st.from_regex(ID_REGEX, fullmatch=True))
"""In the grammar (or naming a planted symlink): each success is a real, fsynced write."""

mixed_ids = st.one_of(hostile_ids, valid_ids)


def draw(strategy: st.SearchStrategy[str], n: int, seed: int = 0) -> list[str]:
    """``n`` examples of ``strategy``, reproducible for a seed, for a run that counts rather than stops."""
    out: list[str] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=n, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def collect(value: str) -> None:
        out.append(value)

    collect()
    return out


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


def snapshot(root: Path, *, exclude: tuple[Path, ...] = ()) -> dict[str, str]:
    """relpath -> sha256 of a file / "dir" / "link:<target>" / "other:<mode>", for a whole tree.

    Symlinks are never followed, so the snapshot itself cannot escape the tree.
    """
    out: dict[str, str] = {}
    skip = {os.path.abspath(p) for p in exclude}
    for top, dirs, files in os.walk(root, followlinks=False):
        if os.path.abspath(top) in skip:
            dirs[:] = []
            continue
        keep = []
        for d in dirs:
            full = os.path.join(top, d)
            if os.path.abspath(full) in skip:
                continue
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out[rel] = "link:" + os.readlink(full)
            else:
                out[rel] = "dir"
                keep.append(d)
        dirs[:] = keep
        for name in files:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, root)
            st_ = os.lstat(full)
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = "link:" + os.readlink(full)
            elif stat.S_ISREG(st_.st_mode):
                with open(full, "rb") as fh:
                    out[rel] = hashlib.sha256(fh.read()).hexdigest()
            else:
                out[rel] = f"other:{stat.S_IFMT(st_.st_mode)}"
    return out


def escapes_after(
    local: Path, sentinel: Path, sentinel_before: dict[str, str], root: Path, outside_before: dict[str, str]
) -> list[str]:
    """What changed outside the tier after a run: the sentinel, anything beside the tier, files resolving out."""
    problems = []
    if snapshot(sentinel) != sentinel_before:
        problems.append("the sentinel beside the tier changed")
    if snapshot(root, exclude=(local,)) != outside_before:
        problems.append("something appeared or changed outside the tier")
    inside = os.path.realpath(local) + os.sep
    for top, _dirs, files in os.walk(local):
        for name in files:
            path = os.path.join(top, name)
            if not os.path.islink(path) and not os.path.realpath(path).startswith(inside):
                problems.append(f"{path} resolves outside the tier")
    return problems


def refusal_problem(exc: BaseException) -> str | None:
    """A refusal must be one of ours, with a message saying what is wrong."""
    if not isinstance(exc, BiopbMcpError):
        return f"bare {type(exc).__name__}: {exc!r}"
    if not str(exc).strip():
        return f"{type(exc).__name__} with an empty message"
    if "Traceback" in str(exc):
        return f"{type(exc).__name__} carries a traceback"
    return None


def landing_problem(local: Path, doc_id: str) -> str | None:
    """After a successful write: the id is in the grammar and its file is inside the tier."""
    if not is_valid_id(doc_id):
        return f"write to {doc_id!r} succeeded outside the id grammar"
    name = doc_id.rsplit("/", 1)[-1] + ".md"
    path = local.joinpath(*doc_id.split("/")[:-1], name)
    real = os.path.realpath(path)
    if not real.startswith(os.path.realpath(local) + os.sep):
        return f"escape: {doc_id!r} landed at {real}"
    if not os.path.isfile(path):
        return f"{doc_id!r}: no file at {path}"
    return None


def store_id_round(store: Any, local: Path, doc_id: str, marker: int, tally: Counter[str]) -> list[str]:
    """read, write body, write old/new of one id through the store; the problems found (none expected)."""
    problems: list[str | None] = []
    tally["ids"] += 1
    try:
        text = read_doc(store, doc_id)
    except Exception as exc:  # any type: the check is on it
        problems.append(refusal_problem(exc))
    else:
        if SECRET in text:
            problems.append(f"escape: read_doc({doc_id!r}) leaked the sentinel")
    body = f"# doc {marker}\n\nbody {marker}\n"
    try:
        store.write_doc(doc_id, body=body)
    except Exception as exc:
        problems.append(refusal_problem(exc))
        tally["refused"] += 1
    else:
        tally["written"] += 1
        if doc_id != "index":
            problems.append(landing_problem(local, doc_id))
            if store.doc_text(doc_id)[0] != body:
                problems.append(f"{doc_id!r}: the written body did not read back")
    try:
        store.write_doc(doc_id, old="body", new="changed")
    except Exception as exc:
        problems.append(refusal_problem(exc))
    else:
        if not is_valid_id(doc_id):
            problems.append(f"old/new on {doc_id!r} succeeded outside the id grammar")
    return [p for p in problems if p]


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in getattr(result, "content", []))


async def mcp_id_round(client: Any, local: Path, doc_id: str, tally: Counter[str]) -> list[str]:
    """read_doc, write_doc and a resource read of one id through a real MCP session; the problems found."""
    from mcp import MCPError

    problems: list[str | None] = []
    tally["ids"] += 1
    read = await client.call_tool("read_doc", {"id": doc_id})
    if read.is_error and not (_text(read).startswith("Error executing tool read_doc: ") and len(_text(read)) > 40):
        problems.append(f"read_doc({doc_id!r}) refused without saying why: {_text(read)[:200]!r}")
    if SECRET in _text(read):
        problems.append(f"escape: read_doc({doc_id!r}) leaked the sentinel")
    write = await client.call_tool("write_doc", {"id": doc_id, "body": "# via mcp\n\nhello\n"})
    if write.is_error:
        tally["refused"] += 1
        if "Traceback" in _text(write) or len(_text(write)) <= 40:
            problems.append(f"write_doc({doc_id!r}) refused without saying why: {_text(write)[:200]!r}")
    else:
        tally["written"] += 1
        if doc_id != "index":
            problems.append(landing_problem(local, doc_id))
    try:
        res = await client.read_resource("biopb://docs/" + doc_id)
    except MCPError as exc:
        tally["uri refused"] += 1
        if exc.error.code not in (-32602, -32603):
            problems.append(f"resource {doc_id!r}: error code {exc.error.code}")
        if len(exc.error.message) <= 20 or "Traceback" in exc.error.message:
            problems.append(f"resource {doc_id!r} refused without saying why: {exc.error.message[:200]!r}")
        if SECRET in exc.error.message:
            problems.append(f"escape: resource {doc_id!r} leaked the sentinel in its error")
    else:
        tally["uri read"] += 1
        if any(SECRET in getattr(c, "text", "") for c in res.contents):
            problems.append(f"escape: resource {doc_id!r} leaked the sentinel")
    return [p for p in problems if p]
