"""The scripted agents: a real MCP client over stdio that plays a case's known solution.

Run as ``python -m bench.scripted --case NAME --workdir DIR --mcp-config FILE [--blind]``. It
starts the server exactly as an agent CLI would (from the ``mcpServers`` JSON), reads the
handshake, calls ``start_kernel`` and runs a solution with ``execute_code`` in the work dir,
following a job that outlives ``promote_after`` with ``poll_job`` until it ends.

* The docs-driven agent (default) reads the case's docs *only if the handshake lists them*, and
  plays the case's full solution only when it could read them all; otherwise it plays the
  textbook solution, as an agent without those docs would. For a case a shipped procedure
  covers, the full solution is the procedure itself: the python blocks of the docs it read
  through the server, run as written, one ``execute_code`` per block, between the case's prelude
  (files and inputs) and epilogue (the files the request names). In session 1 of a two-session
  case it writes the convention down with ``write_doc``; in the middle session of a three-session
  case it applies that convention.
* ``--blind``, the docs-blind agent, reads and writes no doc and always plays the textbook solution:
  it shows which cases need what the docs hold.

They prove the harness and the checks end to end. They say nothing about whether the docs help a
model: they already know the answers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from bench.cases import Case, get_case
from biopb_mcp.text.kernel import parse_job_line

__all__ = ["job_to_follow", "listed_ids", "main", "play"]

_ENTRY = re.compile(r"^\s*[-*]\s+([A-Za-z0-9._/-]+)\s*:", re.MULTILINE)
POLL_INTERVAL = 0.5
"""Seconds between poll_job calls while a promoted solution runs."""


def listed_ids(instructions: str) -> set[str]:
    """Doc ids the handshake lists as index entries (``- <id>: …`` lines, tails included)."""
    return set(_ENTRY.findall(instructions))


def _text(result: CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


def job_to_follow(result: CallToolResult) -> str | None:
    """The id of a job that is still running, from a result of execute_code or poll_job.

    Read from the fixed job line that ends the text (the server's documented contract), never
    from the prose above it, which is for a model and may be reworded at any time.
    """
    line = parse_job_line(_text(result))
    return line.job_id if line is not None and line.running else None


def _log(message: str) -> None:
    print(f"[scripted {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _run_code(client: Client, workdir: Path, code: str) -> int:
    result = await client.call_tool("execute_code", {"code": f"import os\nos.chdir({str(workdir)!r})\n" + code})
    polls = 0
    while (job_id := job_to_follow(result)) is not None:
        await anyio.sleep(POLL_INTERVAL)
        result = await client.call_tool("poll_job", {"job_id": job_id})
        polls += 1
    text = _text(result)
    _log(f"execute_code -> {'error' if result.is_error else 'ok'} after {polls} poll(s):\n{text[:4000]}")
    return 1 if result.is_error or "Traceback" in text else 0


async def play(
    case_name: str,
    workdir: Path,
    mcp_config: Path,
    *,
    session: int | None = None,
    blind: bool = False,
    memo: tuple[str, str] | None = None,
) -> int:
    """Play one session of a case through the server named in ``mcp_config``; 0 when the code ran.
    ``memo`` (doc id, body) replaces the case's own memo: how a test plays a memo that does harm."""
    case = get_case(case_name)
    session = session or case.sessions
    spec = json.loads(mcp_config.read_text(encoding="utf-8"))["mcpServers"]["biopb"]
    env = dict(spec.get("env") or {})
    if os.environ.get("PYTHONPATH"):
        # the server (and so the docs it serves) of the checkout this agent runs from, not whatever
        # copy of the package happens to be installed
        env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    params = StdioServerParameters(command=spec["command"], args=spec.get("args", []), env=env, cwd=str(workdir))
    async with Client(params, read_timeout_seconds=120) as client:
        listed = listed_ids(client.instructions or "")
        _log(
            f"session {session} of {case.sessions}; handshake lists {len(listed)} ids; {'blind' if blind else 'docs-driven'}"
        )
        _log(_text(await client.call_tool("start_kernel", {})))
        if session == 1 < case.sessions:
            return await _first_session(client, case, workdir, blind, memo)
        if session < case.sessions:  # a middle session applies what the first one was told
            return await _run_code(client, workdir, case.second_solution)
        informed = not blind
        texts: dict[str, str] = {}
        # the docs that cover the case first; the other docs its procedure runs (the references
        # its save step calls) only once those could be read
        for group in (case.docs, case.procedure.docs if case.procedure else ()):
            for doc_id in group:
                if not informed or doc_id in texts:
                    continue
                if doc_id in listed:
                    result = await client.call_tool("read_doc", {"id": doc_id})
                    texts[doc_id] = _text(result)
                    _log(f"read_doc({doc_id!r}): {len(texts[doc_id])} chars")
                else:
                    informed = False
                    _log(f"{doc_id!r} is not listed here; not reading it")
        if not informed:
            _log("playing the textbook solution")
            return await _run_code(client, workdir, case.textbook_solution)
        cells = case.solution_cells(texts.__getitem__)
        _log("playing the " + (f"procedure as written ({len(cells)} cells)" if case.procedure else "full solution"))
        for cell in cells:
            if await _run_code(client, workdir, cell):
                return 1
        return 0


async def _first_session(
    client: Client, case: Case, workdir: Path, blind: bool, memo: tuple[str, str] | None = None
) -> int:
    code = await _run_code(client, workdir, case.first_solution)
    memo = memo or case.memo
    if memo is not None and not blind:
        doc_id, body = memo
        result = await client.call_tool("write_doc", {"id": doc_id, "body": body})
        _log(f"write_doc({doc_id!r}) -> {'error' if result.is_error else 'ok'}")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scripted", description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, help="bench case name")
    parser.add_argument("--workdir", required=True, type=Path, help="the case's work dir")
    parser.add_argument("--mcp-config", required=True, type=Path, help="mcpServers JSON naming the biopb server")
    parser.add_argument(
        "--session", type=int, default=None, help="session number (default: $BENCH_SESSION, else the last)"
    )
    parser.add_argument("--blind", action="store_true", help="read no doc, play the textbook solution")
    parser.add_argument(
        "--memo",
        type=Path,
        default=None,
        help="a JSON file [doc id, body]: the memo session 1 writes instead of the case's own",
    )
    args = parser.parse_args(argv)
    session = args.session or int(os.environ.get("BENCH_SESSION", "0") or 0) or None
    memo = None
    if args.memo is not None:
        doc_id, body = json.loads(args.memo.read_text(encoding="utf-8"))
        memo = (str(doc_id), str(body))
    return anyio.run(
        lambda: play(args.case, args.workdir.resolve(), args.mcp_config, session=session, blind=args.blind, memo=memo)
    )


if __name__ == "__main__":
    raise SystemExit(main())
