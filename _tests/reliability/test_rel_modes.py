"""Mode bits of the local docs tier: 0700 dirs, 0600 files.

Other users on a shared workstation must not read the lab's docs or their history, whatever the
user's umask (a permissive 002 included); a stricter umask (077) gives the same. The store runs in
a child process so the umask, which is process-wide, never leaks into other tests.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    os.umask(int(sys.argv[2], 8))
    from biopb_mcp.docs.store import DocStore
    from biopb_mcp.text.doc_views import read_doc
    store = DocStore(Path(sys.argv[1]))
    store.write_doc("group/sub/deep", body="# deep\\n\\nfirst\\n")
    store.write_doc("group/sub/deep", old="first", new="second")
    store.write_doc("top", body="# top\\n\\ntext\\n")
    store.write_doc("index", old="## Unfiled", new="## Unfiled (hand-sorted later)")
    print(read_doc(store, "top@history")[:20])
    """
)


@pytest.mark.parametrize("umask", ["002", "022", "027", "077"])
def test_tier_and_history_are_private(tmp_path: Path, umask: str) -> None:
    local = tmp_path / "cfg" / "docs"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(local), umask], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    dirs, files = [], []
    for top, dnames, fnames in os.walk(tmp_path / "cfg"):
        dirs += [Path(top) / d for d in dnames]
        files += [Path(top) / f for f in fnames]
    dirs.append(tmp_path / "cfg")
    names = {p.relative_to(local).as_posix() for p in files if local in p.parents}
    for expected in ("index.md", "top.md", "group/sub/deep.md", ".lock", ".shipped-manifest.json"):
        assert expected in names, sorted(names)
    assert any(n.startswith(".history/") for n in names), sorted(names)
    for d in dirs:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, (
            f"{d} is {oct(stat.S_IMODE(d.stat().st_mode))} under umask {umask}"
        )
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, (
            f"{f} is {oct(stat.S_IMODE(f.stat().st_mode))} under umask {umask}"
        )
