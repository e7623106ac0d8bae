"""The scripted agent: a real MCP client over stdio that plays a case's known solution.

Run as ``python -m bench.scripted --case NAME --workdir DIR --mcp-config FILE``. It starts the
server exactly as an agent CLI would (from the ``mcpServers`` JSON), reads the handshake, calls
``start_kernel``, reads the case's docs *only if that arm's handshake index lists them* (so in the
no-docs arm it reads none of the procedures), runs the solution with ``execute_code`` in the work
dir, and follows a promoted job with ``poll_job`` until it ends.

It proves the harness and the checks end to end. It says nothing about whether the docs help a
model: it already knows the answer.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from bench.cases import get_case

__all__ = ["listed_ids", "main", "play"]

_ENTRY = re.compile(r"^\s*[-*]\s+([A-Za-z0-9._/-]+)\s*:", re.MULTILINE)
_PROMOTED = re.compile(r"^(job-\d+) running:")
_RUNNING = re.compile(r"^job-\d+: running for ")
POLL_INTERVAL = 0.5
"""Seconds between poll_job calls while a promoted solution runs."""


def listed_ids(instructions: str) -> set[str]:
    """Doc ids the handshake lists as index entries (``- <id>: …`` lines, tails included)."""
    return set(_ENTRY.findall(instructions))


def _text(result: CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


def _log(message: str) -> None:
    print(f"[scripted {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def play(case_name: str, workdir: Path, mcp_config: Path) -> int:
    """Play one case's solution through the server named in ``mcp_config``; 0 when the code ran."""
    case = get_case(case_name)
    spec = json.loads(mcp_config.read_text(encoding="utf-8"))["mcpServers"]["biopb"]
    params = StdioServerParameters(command=spec["command"], args=spec.get("args", []), env=spec.get("env"), cwd=str(workdir))
    async with Client(params, read_timeout_seconds=120) as client:
        listed = listed_ids(client.instructions or "")
        _log(f"handshake lists {len(listed)} ids")
        _log(_text(await client.call_tool("start_kernel", {})))
        for doc_id in case.docs:
            if doc_id in listed:
                result = await client.call_tool("read_doc", {"id": doc_id})
                _log(f"read_doc({doc_id!r}): {len(_text(result))} chars")
            else:
                _log(f"{doc_id!r} is not listed in this arm; not reading it")
        code = f"import os\nos.chdir({str(workdir)!r})\n" + case.solution
        result = await client.call_tool("execute_code", {"code": code})
        text = _text(result)
        promoted = _PROMOTED.match(text)
        while promoted or _RUNNING.match(text):
            job_id = promoted.group(1) if promoted else text.split(":", 1)[0]
            await anyio.sleep(POLL_INTERVAL)
            result = await client.call_tool("poll_job", {"job_id": job_id})
            text, promoted = _text(result), None
        _log(f"execute_code -> {'error' if result.is_error else 'ok'}:\n{text[:4000]}")
        return 1 if result.is_error or "Traceback" in text else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scripted", description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, help="bench case name")
    parser.add_argument("--workdir", required=True, type=Path, help="the case's work dir")
    parser.add_argument("--mcp-config", required=True, type=Path, help="mcpServers JSON naming the biopb server")
    args = parser.parse_args(argv)
    return anyio.run(play, args.case, args.workdir.resolve(), args.mcp_config)


if __name__ == "__main__":
    raise SystemExit(main())
