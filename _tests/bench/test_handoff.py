"""--agent handoff end to end: the SDK client plays the MCP host over HTTP with the handed-out URL
and token, runs the case's solution, writes DONE; the run is scored, traced, and its server stops."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from _tests.server.test_http import HttpServer
from _tests.support.http_start import started, token_accepted
from _tests.support.results import text_of
from _tests.support.runner import run_to_end
from bench.agents import make_agent
from bench.cases import get_case
from bench.run import RunSpec, run_one


async def _play_host(handoff: dict, code: str) -> int:
    """What a person in an MCP host would do with the handoff: connect, start, run, report."""
    async with (
        httpx2.AsyncClient(headers=handoff["headers"], timeout=60) as http,
        Client(streamable_http_client(handoff["url"], http_client=http), mode="legacy") as client,
    ):
        assert "start_kernel" in (client.instructions or "")
        assert not (await client.call_tool("start_kernel", {})).is_error
        status_part = (await client.call_tool("server_status", {})).content[0]
        assert isinstance(status_part, TextContent)
        status = json.loads(status_part.text)
        # followed to its end, as a person watching the host would: on a loaded machine the
        # solution can outlive promote_after, and DONE must not come while it still runs
        result = await run_to_end(client, f"import os\nos.chdir({handoff['workdir']!r})\n" + code)
        assert not result.is_error, text_of(result)
    return int(status["server"]["pid"])


def test_handoff_run_passes_is_traced_and_its_server_stops_after_done(tmp_path: Path) -> None:
    case = get_case("crop-roi")
    spec = RunSpec(make_agent("handoff"), ["docs"], [], tmp_path, timeout=120)
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(run_one, spec, case, "docs", 0)
        handoff_json = tmp_path / "runs" / "crop-roi--docs--r0" / "handoff.json"
        deadline = time.monotonic() + 90
        while not handoff_json.is_file():
            assert time.monotonic() < deadline and not future.done(), (
                future.result() if future.done() else "no handoff.json"
            )
            time.sleep(0.1)
        handoff = json.loads(handoff_json.read_text(encoding="utf-8"))
        assert handoff["url"].startswith("http://127.0.0.1:") and handoff["token"]
        assert handoff["prompt"].startswith(case.request) and handoff["workdir"] in handoff["prompt"]
        assert handoff["mcpServers"]["biopb"]["headers"] == {"Authorization": f"Bearer {handoff['token']}"}
        server_pid = anyio.run(_play_host, handoff, case.solution)
        assert psutil.pid_exists(server_pid) and not future.done()  # it waits for DONE, not for the client
        Path(handoff["done_file"]).touch()
        row = future.result(timeout=60)
    assert row["passed"], row
    assert row["harness_error"] is None and not row["timed_out"] and row["exit_code"] == 0
    assert row["tool_calls"]["execute_code"] == 1 and row["tool_calls"]["start_kernel"] == 1
    try:
        psutil.Process(server_pid).wait(timeout=10)
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(server_pid)


pytestmark = pytest.mark.timeout(240)


def test_the_start_is_read_only_once_the_token_line_follows_the_serving_line() -> None:
    """Under load the serving line can be on stderr before the token lines: reading then gave a
    run with "token": null (or a stale file's token), which the server refused."""
    serving = "biopb-mcp serving streamable HTTP at http://127.0.0.1:4321/mcp (loopback only)\n"
    token = (
        "Bearer token (new at every start; also in /x/http-token-1, mode 0600):\nAbCdEfGhIjKlMnOpQrStUv123\n"
        'MCP client config: {"mcpServers": {"biopb": {"type": "http", "url": "http://127.0.0.1:4321/mcp", '
        '"headers": {"Authorization": "Bearer AbCdEfGhIjKlMnOpQrStUv123"}}}}\n'
    )
    assert started(serving) is None
    assert started(token + serving) is None  # a token printed before this server's serving line is not its own
    assert started(serving + token) == ("http://127.0.0.1:4321/mcp", "AbCdEfGhIjKlMnOpQrStUv123")


def test_a_handed_out_token_is_checked_against_the_server(tmp_path: Path) -> None:
    server = HttpServer(tmp_path)
    try:
        found = started(server.stderr())
        assert found is not None
        url, token = found
        assert token_accepted(url, token)
        assert not token_accepted(url, "not-" + token)
    finally:
        server.stop()
