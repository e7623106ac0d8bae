"""Helpers for the reliability tests: isolated server trees, tree snapshots, raw-protocol servers.

Everything here is real: real files under tmp dirs, real ``python -m biopb_mcp`` subprocesses.
"""

from __future__ import annotations

import hashlib
import os
import re
import selectors
import stat
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from _tests.support.stdio_procs import stdio_params as shared_stdio_params


def write_config(root: Path, extra: str = "") -> dict[str, str]:
    """A config tree under ``root`` (config, state, runtime dirs) and the env that points at it.

    Every path the server uses is spelled out in config.toml, so the server touches nothing
    outside ``root`` whatever the caller's environment says.
    """
    config = root / "config"
    config.mkdir(parents=True, exist_ok=True)
    text = (
        "[server]\n"
        f'state_dir = "{root / "state"}"\n'
        f'runtime_dir = "{root / "runtime"}"\n'
        'log_level = "INFO"\n'
        + extra
    )
    (config / "config.toml").write_text(text)
    return {
        "BIOPB_CONFIG_DIR": str(config),
        "XDG_STATE_HOME": str(root / "state"),
        "XDG_RUNTIME_DIR": str(root / "runtime"),
        "XDG_CACHE_HOME": str(root / "cache"),
    }


def stdio_params(env: dict[str, str]) -> StdioServerParameters:
    """Parameters for the real server over stdio, in its own config tree (the whole environment kept)."""
    return shared_stdio_params({**os.environ, **env})


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
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link:" + os.readlink(full)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as fh:
                    out[rel] = hashlib.sha256(fh.read()).hexdigest()
            else:
                out[rel] = f"other:{stat.S_IFMT(st.st_mode)}"
    return out


VERSION_LINE = re.compile(r"^- v(\d+)")


def history_texts(store: Any, doc_id: str) -> list[str]:
    """Every kept version's text of ``doc_id``, read through the store's public views."""
    listing = store.read_doc(f"{doc_id}@history")
    texts = []
    for line in listing.splitlines():
        match = VERSION_LINE.match(line)
        if match:
            view = store.read_doc(f"{doc_id}@v{match.group(1)}")
            texts.append(view.split("\n\n", 1)[1])
    return texts


# --------------------------------------------------------------------------- crash injection

CRASH_LINES = 290
"""Lines of the big body: under the 300-line cap, about 0.9 MB, so a write spans many blocks."""


def big_body(tag: str) -> str:
    """A large doc body whose every line carries ``tag``: a torn file cannot pass for a whole one."""
    line = ("lorem ipsum " * 250) + f"{tag}\n"
    return f"# big\n\nversion {tag}\n\n" + line * CRASH_LINES


def created_body(doc_id: str) -> str:
    return f"# Created {doc_id}\n\nA doc created by the crash test, {doc_id}.\n"


def store_writer(local: str, seed: int, creates: int, ready_fd: int) -> None:
    """Child-process body for crash injection: write the big doc and create docs until killed."""
    from biopb_mcp.docs.store import DocStore

    store = DocStore(Path(local))
    store.read_doc("index")  # seed the index before the parent starts the clock
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
    forkserver would re-import the test runner's main module in every child).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into the test runner
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
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise RuntimeError("the writer child never started")
        sel.close()
    finally:
        os.close(r)
    return pid
