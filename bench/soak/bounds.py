"""Soak phases for what must stay bounded: hostile file names, big docs, wide prompts, edits.

* ``names``: files whose names are not UTF-8 or hold control characters, completed over stdio
  with a kernel running: every answer is UTF-8 JSON with no lone surrogate, every value opens its
  file in the kernel as a Python string literal, and the session still answers at the end.
* ``doc-answers``: a 2 MB doc in 106 lines written, rewritten, read page by page (and its
  history, its diff against a shipped doc), read as a resource, embedded in a prompt, searched:
  every answer under ``kernel.max_result_bytes`` as sent, the pages adding up to the doc.
* ``wide-inputs``: a 930 KB procedure whose Inputs list names 100,000 inputs: prompts/list stays
  under the bound with every prompt in it (its time is reported, not judged).
* ``edit-memory``: 60 edits of a 4.5 MB listed procedure through a real stdio server, the prompt
  list read after each: the server's RSS before and after.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from random import Random
from typing import Any

from _tests.support import raw_server as servers

__all__ = ["FOUND", "doc_answers", "edit_memory", "names", "wide_inputs"]

FOUND = {
    "names: answers not UTF-8 JSON, or holding a lone surrogate": "a completion answer a client cannot decode",
    "names: completion values that do not open their file": "a shown name that, as a Python string, names no file",
    "names: sessions that did not answer after the completions": "the session ended (or hung) on a name",
    "doc answers over kernel.max_result_bytes": "a tool, resource or prompt answer bigger than the bound as sent",
    "doc answers: writes reported as failures": "a write_doc that succeeded but answered an error",
    "doc answers: pages not adding up to the doc": "read_doc's pages, joined, differ from the doc",
    "wide inputs: prompts/list over the bound or missing prompts": "a prompt list a host would drop or show partly",
    "edit memory: server RSS grown past 150 MB over the edits": "what a doc edit leaves in memory adding up",
}
"""What these phases look for, each a count that must be 0."""

LIMIT = 1_000_000
"""kernel.max_result_bytes as the phases run it (the default)."""

MAX_RSS_GROWTH = 150 * 1024 * 1024
"""RSS growth over the edits that counts as a finding (the issue measured +269 MB over 60)."""

_ALPHABET = [*range(1, 32), 127, *range(0x80, 0x100), *b"\\ abcXYZ019._-'"]
"""Bytes a hostile name is drawn from: controls, DEL, bytes that are no UTF-8 on their own, a
backslash and a few plain ones; never ``/``, NUL or a double quote."""


def _hostile_names(count: int, seed: int) -> list[bytes]:
    rng = Random(seed)
    found: set[bytes] = set()
    while len(found) < count:
        name = bytes(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 24)))
        if name not in (b".", b"..") and not name.startswith(b"."):
            found.add(name)
    return sorted(found)


def _surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return re.search(r"[\ud800-\udfff]", value) is not None
    if isinstance(value, dict):
        return any(_surrogate(k) or _surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_surrogate(v) for v in value)
    return False


def _escaped_prefix(name: bytes, length: int) -> str:
    """What a person types to complete ``name``: its first bytes, shown as the server shows them."""
    from biopb_mcp.fs.names import escape_name

    return escape_name(name[:length].decode("utf-8", "surrogateescape"))


def names(root: Path, count: int, seed: int) -> tuple[Counter[str], list[tuple[str, str]]]:
    """Completions of ``count`` hostile file names over stdio (see the module docstring)."""
    tally: Counter[str] = Counter()
    problems: list[tuple[str, str]] = []
    env = servers.write_config(root / "names", log_level="ERROR")
    where = root / "names" / "files"
    where.mkdir(parents=True)
    hostile = _hostile_names(count, seed)
    server = servers.RawServer(env, root / "names" / "server.err")
    try:
        server.initialize()
        server.call("start_kernel", timeout=120)
        code = (
            "import os\n"
            f"os.chdir({str(where)!r})\n"
            f"for h in {[n.hex() for n in hostile]!r}:\n"
            "    open(bytes.fromhex(h), 'wb').close()\n"
            "print(len(os.listdir(b'.')))\n"
        )
        made = servers.result_text(server.call("execute_code", {"code": code}, timeout=120))
        tally["names: hostile file names made"] += int(made.split()[0]) if made.split() else 0
        values: set[str] = set()
        for name in hostile:
            typed = _escaped_prefix(name, Random(seed + len(name)).randint(0, 3))
            rid = server.request(
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "flatfield"}, "argument": {"name": "image", "value": typed}},
            )
            try:
                answer = server.response(rid, timeout=60)
            except (servers.WireError, TimeoutError, EOFError) as exc:
                problems.append(("names: answers not UTF-8 JSON, or holding a lone surrogate", f"{typed!r}: {exc}"))
                break
            line = server.raw_lines[-1]
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(("names: answers not UTF-8 JSON, or holding a lone surrogate", f"{typed!r}: {exc}"))
            if _surrogate(answer):
                problems.append(("names: answers not UTF-8 JSON, or holding a lone surrogate", f"{typed!r}"))
            if "error" in answer:
                problems.append(("names: answers not UTF-8 JSON, or holding a lone surrogate", str(answer["error"])))
                continue
            tally["names: completions"] += 1
            values.update(answer["result"]["completion"]["values"])
        tally["names: distinct values offered"] += len(values)
        # what an agent does with a value: put it in a Python string, as it is (quotes escaped)
        check = (
            "import ast, json\n"
            f"shown = json.loads({json.dumps(sorted(values))!r})\n"
            "gone = [v for v in shown if not os.path.lexists(ast.literal_eval('\"' + v.replace('\"', '\\\\\"') + '\"'))]\n"
            "print(len(gone), json.dumps(gone[:5]))\n"
        )
        checked = servers.result_text(server.call("execute_code", {"code": check}, timeout=120))
        missing = int(checked.split()[0]) if checked.split() and checked.split()[0].isdigit() else len(values)
        for _ in range(missing):
            problems.append(("names: completion values that do not open their file", checked[:300]))
        after = servers.result_text(server.call("execute_code", {"code": "print(6 * 7)"}, timeout=60))
        if "42" not in after:
            problems.append(("names: sessions that did not answer after the completions", after[:200]))
    except (servers.WireError, TimeoutError, EOFError, KeyError) as exc:
        problems.append(("names: sessions that did not answer after the completions", repr(exc)[:300]))
    finally:
        server.close()
    return tally, problems


def _sent(result: Any) -> int:
    """Bytes of a result as sent, with room for its JSON-RPC envelope."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8")) + 512


def big_doc(tag: str, size: int = 2_000_000, lines: int = 100) -> str:
    """A procedure of about ``size`` bytes in ``lines + 6`` lines."""
    width = size // lines
    body = "\n".join(f"{n:03d} {tag} " + "step " * (width // 5) for n in range(lines))
    return f"# Huge\n\n## Inputs\n- `image`: the image file.\n\n## Steps\n{body}\n"


_PAGE_NOTE = re.compile(r"\n\[\S+ is longer than one answer holds.*\]\n\Z", re.S)


async def _pages(client: Any, ref: str, tally: Counter[str], sizes: list[int]) -> str:
    """Every page of ``read_doc(ref)``, notes taken off, joined."""
    text, page = "", 1
    while True:
        result = await client.call_tool("read_doc", {"id": ref, "page": page})
        sizes.append(_sent(result))
        tally["doc answers: read_doc pages"] += 1
        part = "".join(getattr(b, "text", "") for b in result.content)
        text += _PAGE_NOTE.sub("", part)
        found = re.search(rf'read_doc\("{re.escape(ref)}", page=(\d+)\)', part)
        if result.is_error or not found:
            return text
        page = int(found.group(1))


async def doc_answers(root: Path) -> tuple[Counter[str], list[tuple[str, str]]]:
    """Every kind of doc answer for a 2 MB doc, in process (legacy era: JSON-RPC on the way)."""
    from mcp import Client

    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.server import build_server

    tally: Counter[str] = Counter()
    problems: list[tuple[str, str]] = []
    env = servers.write_config(root / "doc-answers", log_level="ERROR")
    mcp, state = build_server(load_settings(Path(env["BIOPB_CONFIG_DIR"])))
    sizes: list[int] = []
    try:
        async with Client(mcp, mode="legacy") as client:
            for doc_id, tag in (("huge", "v1"), ("huge", "v2"), ("flatfield", "mine")):
                wrote = await client.call_tool("write_doc", {"id": doc_id, "body": big_doc(tag)})
                sizes.append(_sent(wrote))
                tally["doc answers: 2 MB writes"] += 1
                if wrote.is_error:
                    problems.append(("doc answers: writes reported as failures", str(wrote.content)[:200]))
            for ref, want in (("huge", big_doc("v2")), ("huge@v1", big_doc("v1")), ("flatfield@diff", None)):
                joined = await _pages(client, ref, tally, sizes)
                if want is not None and not joined.endswith(want):
                    problems.append(("doc answers: pages not adding up to the doc", f"{ref}: {len(joined)} characters"))
            for uri in ("biopb://docs/huge", "biopb://docs/huge@history", "biopb://docs/index"):
                sizes.append(_sent(await client.read_resource(uri)))
                tally["doc answers: resource reads"] += 1
            sizes.append(_sent(await client.get_prompt("huge", {"image": "x.tif"})))
            tally["doc answers: prompts/get"] += 1
            sizes.append(_sent(await client.call_tool("search_docs", {"query": "step", "max_results": 50})))
            tally["doc answers: searches"] += 1
    finally:
        state.kernel.shutdown()
    tally["doc answers: largest answer (bytes)"] = max(sizes)
    for size in sizes:
        if size > LIMIT:
            problems.append(("doc answers over kernel.max_result_bytes", f"{size:,} bytes"))
    return tally, problems


def wide_doc(inputs: int) -> str:
    listed = ", ".join(f"`in{n}`" for n in range(inputs))
    return f"# Wide\n\n## Inputs\n- {listed}: every one of them.\n\n## Steps\n1. go\n"


async def wide_inputs(root: Path, inputs: int) -> tuple[Counter[str], list[tuple[str, str]]]:
    """prompts/list with one procedure listing ``inputs`` names, in process (legacy era)."""
    from mcp import Client

    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.server import build_server

    tally: Counter[str] = Counter()
    problems: list[tuple[str, str]] = []
    env = servers.write_config(root / "wide", log_level="ERROR")
    mcp, state = build_server(load_settings(Path(env["BIOPB_CONFIG_DIR"])))
    try:
        async with Client(mcp, mode="legacy") as client:
            before = {p.name for p in (await client.list_prompts()).prompts}
            local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
            (local / "wide.md").write_text(wide_doc(inputs))
            await client.call_tool("write_doc", {"id": "index", "old": "ignored:", "new": "- wide: all\n\nignored:"})
            t0 = time.monotonic()
            listed = await client.list_prompts()
            tally["wide inputs: prompts/list (ms)"] = round((time.monotonic() - t0) * 1000)
            tally["wide inputs: prompts/list (bytes)"] = _sent(listed)
            tally["wide inputs: doc bytes"] = len(wide_doc(inputs).encode())
            names = {p.name for p in listed.prompts}
            wide = next((p for p in listed.prompts if p.name == "wide"), None)
            tally["wide inputs: arguments carried"] = len(wide.arguments or []) if wide is not None else 0
            if _sent(listed) > LIMIT or not before <= names or wide is None:
                problems.append(
                    ("wide inputs: prompts/list over the bound or missing prompts", f"{_sent(listed):,} bytes")
                )
    finally:
        state.kernel.shutdown()
    return tally, problems


def edit_memory(root: Path, edits: int, size: int) -> tuple[Counter[str], list[tuple[str, str]]]:
    """``edits`` writes of a ``size``-byte listed procedure through a real stdio server."""
    import psutil

    tally: Counter[str] = Counter()
    problems: list[tuple[str, str]] = []
    env = servers.write_config(root / "edits", log_level="ERROR")
    server = servers.RawServer(env, root / "edits" / "server.err")
    try:
        server.initialize()
        process = psutil.Process(server.proc.pid)
        rss: list[int] = []
        for n in range(edits + 1):
            wrote = server.call("write_doc", {"id": "big", "body": big_doc(f"e{n}", size=size, lines=250)}, timeout=120)
            if wrote.get("isError"):
                problems.append(("doc answers: writes reported as failures", servers.result_text(wrote)[:200]))
            rid = server.request("prompts/list")
            listed = server.response(rid, timeout=120)
            if "error" in listed:
                problems.append(("edit memory: server RSS grown past 150 MB over the edits", str(listed["error"])))
            rss.append(process.memory_info().rss)
        tally["edit memory: edits of the listed procedure"] += edits
        tally["edit memory: RSS after the first write (MB)"] = rss[0] // 2**20
        tally["edit memory: RSS after half the edits (MB)"] = rss[len(rss) // 2] // 2**20
        tally["edit memory: RSS after the last edit (MB)"] = rss[-1] // 2**20
        tally["edit memory: RSS peak (MB)"] = max(rss) // 2**20
        if rss[-1] - rss[0] > MAX_RSS_GROWTH:
            problems.append(
                (
                    "edit memory: server RSS grown past 150 MB over the edits",
                    f"{rss[0] // 2**20} -> {rss[-1] // 2**20} MB",
                )
            )
    finally:
        server.close()
    return tally, problems
