"""Bad files in the local tier, against the real server over stdio.

A binary ``x.md``, a 50 MB doc, a doc that is one 1 MB line, an index of 10,000 lines, a
frontmatter block that never closes, a directory named ``y.md``, and an unreadable ``z.md``
(mode 000; as root, where mode 000 is still readable, a FIFO, which would block a naive open
forever), plus a dangling symlink ``w.md``; the index lists every one. The server starts, the
handshake renders, each bad file answers a read with one clear error, and the listing and search
go on around it with a warning in the server log.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from _tests.support.raw_server import write_config
from _tests.support.rel_helpers import stdio_params

pytestmark = pytest.mark.anyio

AS_ROOT = os.geteuid() == 0
UNREADABLE_KIND = "fifo" if AS_ROOT else "mode 000"

# id -> what its refusal must say (lower-cased fragment)
BAD = {
    "x": "nul bytes",
    "huge": "bytes, over the",
    "y": "directory",
    "z": "not a regular file" if AS_ROOT else "permission denied",
    "w": "no doc",
}


def _text(result: object) -> str:
    return "\n".join(b.text for b in getattr(result, "content", []) if isinstance(b, TextContent))


def build_bad_tier(local: Path) -> None:
    local.mkdir(parents=True)
    (local / "x.md").write_bytes(b"# x\n\x00\x01\x02\xff\xfe binary payload " + os.urandom(4096))
    with open(local / "huge.md", "w") as fh:  # 50 MB of real text, not a sparse file
        chunk = "# huge\n\n" + ("a line of a doc that is far too big to be one\n" * 20000)
        while fh.tell() < 50 * 1024 * 1024:
            fh.write(chunk)
    (local / "longline.md").write_text("# long line\n\n" + "w" * 1_000_000 + " needle-longline\n")
    (local / "unclosed.md").write_text(
        "---\ndescription: frontmatter that never closes\ntitle: [unclosed\n\n# Unclosed\n\nneedle-unclosed body\n"
    )
    (local / "y.md").mkdir()
    (local / "y.md" / "inner.md").write_text("# inner\n\nneedle-inner of a dir named y.md\n")
    if AS_ROOT:
        os.mkfifo(local / "z.md")
    else:
        (local / "z.md").write_text("# z\n\nsecret\n")
        os.chmod(local / "z.md", 0)
    os.symlink(local / "gone-target.md", local / "w.md")
    (local / "good.md").write_text("# good\n\nneedle-good plain doc\n")
    lines = ["# biopb docs", "", "## Bad files"]
    lines += [
        f"- {doc_id}: the {doc_id} file"
        for doc_id in ["x", "huge", "longline", "unclosed", "y", "z", "w", "good", "y.md/inner"]
    ]
    lines += ["", "## Filler"]
    lines += [f"- filler-{i}: entry {i} of a hand-grown index" for i in range(10_000 - len(lines))]
    (local / "index.md").write_text("\n".join(lines) + "\n")
    assert len((local / "index.md").read_text().splitlines()) == 10_000


async def test_server_survives_a_tier_of_bad_files(tmp_path: Path, counts: Counter[str]) -> None:
    env = write_config(tmp_path)
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    build_bad_tier(local)
    log_file = tmp_path / "state" / "server.log"
    with anyio.fail_after(120):
        async with Client(stdio_params(env), mode="legacy", read_timeout_seconds=60) as client:
            instructions = client.instructions or ""
            assert "- good: the good file" in instructions and "filler-0" in instructions
            # 10,000 lines are far past the cap: the handshake carries the head and says how to see the rest.
            assert "filler-9000" not in instructions and 'read_doc("index") shows it whole' in instructions

            for doc_id, says in BAD.items():
                with anyio.fail_after(30):
                    result = await client.call_tool("read_doc", {"id": doc_id})
                assert result.is_error, f"read_doc({doc_id!r}) did not refuse"
                assert len(result.content) == 1, "one clear error, not a cascade"
                text = _text(result)
                assert says in text.lower(), f"{doc_id}: {text}"
                assert "Traceback" not in text and len(text) < 2000

            # The odd-but-legal ones read fine; one longer than an answer holds comes in pages,
            # each note naming the next.
            for doc_id, needle in (
                ("longline", "needle-longline"),
                ("unclosed", "needle-unclosed"),
                ("y.md/inner", "needle-inner"),
            ):
                result = await client.call_tool("read_doc", {"id": doc_id})
                text = shown = _text(result)
                while not result.is_error and (more := re.search(rf'read_doc\("{doc_id}", page=(\d+)\)', shown)):
                    result = await client.call_tool("read_doc", {"id": doc_id, "page": int(more.group(1))})
                    shown = _text(result)
                    text += shown
                assert not result.is_error and needle in text, text[:300]

            # resources/list: every page comes back; the bad files are skipped, not fatal.
            uris: list[str] = []
            cursor = None
            while True:
                page = await client.list_resources(cursor=cursor)
                uris += [str(r.uri) for r in page.resources]
                cursor = page.next_cursor
                if not cursor:
                    break
            assert "biopb://docs/good" in uris and "biopb://docs/longline" in uris
            for doc_id in BAD:
                assert f"biopb://docs/{doc_id}" not in uris

            # search_docs goes around the bad files.
            for needle, expect in (
                ("needle-good", "good"),
                ("needle-unclosed", "unclosed"),
                ("needle-inner", "y.md/inner"),
            ):
                result = await client.call_tool("search_docs", {"query": needle})
                assert not result.is_error and expect in _text(result), _text(result)
            result = await client.call_tool("search_docs", {"query": "needle-longline"})
            assert not result.is_error and len(_text(result)) < 5000, "a 1 MB line must not come back whole"

            # Still healthy after all that.
            assert not (await client.call_tool("read_doc", {"id": "good"})).is_error

    log = log_file.read_text(errors="replace")
    for name in ("x.md", "huge.md"):
        assert any("WARNING" in line and name in line for line in log.splitlines()), f"no warning for {name}"
    counts["bad files in the tier (server survived each)"] += len(BAD) + 3
    counts[f"bad files: unreadable variant used = {UNREADABLE_KIND}"] += 1
