"""Every tool's answers, read the three ways MCP hosts read a tool result.

(a) the spec's reading: ``content`` (text, and images as pictures);
(b) Claude Code's and VS Code's: ``JSON.stringify(structuredContent)`` when the result carries
    it, else ``content``;
(c) a text-only host's: the text parts alone.

In each reading the model must still get the output, the error, the job id and the next step;
an image in (c) is reached by the file its placeholder names. A real kernel, a real store and an
in-process MCP client, in the handshake era today's hosts speak.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, ImageContent, TextContent

from _tests.support.isolation import isolated_vars, write_config
from _tests.support.runner import run_to_end
from biopb_mcp.config.settings import load_settings
from biopb_mcp.server import build_server
from biopb_mcp.server.state import AppState
from biopb_mcp.text.kernel import parse_job_line

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PRINTS_RAISES_AND_SHOWS = """\
import matplotlib
matplotlib.use("Agg")  # as agents do when a script they copied says so: plt.show() then shows nothing
import matplotlib.pyplot as plt
print("the mean is 4.25")
plt.figure(figsize=(3, 2))
plt.plot([1, 3, 2])
plt.show()
raise ValueError("threshold too low for this field")
"""


def spec_reading(result: CallToolResult) -> str:
    """Text parts, and each image as the picture a model would see (here: its decoded size)."""
    parts = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"<picture {block.mime_type} {len(base64.b64decode(block.data))} bytes>")
    return "\n".join(parts)


def structured_first_reading(result: CallToolResult) -> str:
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return spec_reading(result)


def text_only_reading(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


READINGS = {"spec": spec_reading, "structured-first": structured_first_reading, "text-only": text_only_reading}


def assert_seen(result: CallToolResult, *needles: str) -> None:
    """Every needle (a substring, or ``re:<pattern>``) is in every host's reading."""
    for host, read in READINGS.items():
        seen = read(result)
        for needle in needles:
            found = re.search(needle[3:], seen) if needle.startswith("re:") else needle in seen
            assert found, f"{host} host reading lacks {needle!r}:\n{seen[:2000]}"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def state_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("readings")
    mp = pytest.MonkeyPatch()
    for name, value in isolated_vars(root).items():
        mp.setenv(name, value)
    # small pages and a short promotion, so paging and jobs happen with little output and time
    write_config(root, "[kernel]\nmax_output_chars = 2000\npromote_after = 1.0\n")
    try:
        yield root
    finally:
        mp.undo()


@pytest.fixture(scope="module")
async def served(state_dirs: Path) -> AsyncIterator[tuple[Client, AppState]]:
    settings = load_settings()
    mcp, state = build_server(settings)
    try:
        async with Client(mcp, mode="legacy") as client:
            yield client, state
    finally:
        state.kernel.shutdown()


async def call(client: Client, tool: str, **args: Any) -> CallToolResult:
    with anyio.fail_after(120):
        return await client.call_tool(tool, args)


async def test_no_tool_declares_or_returns_structured_content(served: tuple[Client, AppState]) -> None:
    client, _ = served
    tools = (await client.list_tools()).tools
    assert tools and all(tool.output_schema is None for tool in tools), [t.name for t in tools if t.output_schema]


async def test_a_kernel_not_started_names_start_kernel_in_every_reading(served: tuple[Client, AppState]) -> None:
    client, _ = served
    for tool, args in (("execute_code", {"code": "1"}), ("inspect_object", {"path": "x"}), ("interrupt_kernel", {})):
        result = await call(client, tool, **args)
        assert result.is_error and result.structured_content is None, tool
        assert_seen(result, "start_kernel")
    assert_seen(await call(client, "poll_job", job_id="job-1"), "No code has run yet")


async def test_a_cell_that_prints_raises_and_shows_a_figure_is_seen_whole(served: tuple[Client, AppState]) -> None:
    client, _ = served
    assert_seen(await call(client, "start_kernel"), "Kernel ready")
    result = await run_to_end(client, PRINTS_RAISES_AND_SHOWS)
    assert result.is_error and result.structured_content is None
    line = parse_job_line(text_only_reading(result))
    assert line is not None and line.status == "error" and line.next_offset is None
    assert_seen(
        result,
        "the mean is 4.25",
        "ValueError",
        "threshold too low for this field",
        "Traceback",
        f"[{line.job_id}: error]",
    )
    # the figure, opened under Agg, still reaches the model: as a picture, and as a file in text
    assert "<picture image/png" in spec_reading(result)
    saved = re.findall(r"saved to (\S+\.png)\]", text_only_reading(result))
    assert len(saved) == 1 and Path(saved[0]).read_bytes().startswith(b"\x89PNG")


async def test_a_job_and_its_pages_carry_the_id_and_the_next_offset(
    served: tuple[Client, AppState], tmp_path: Path
) -> None:
    client, _ = served
    await call(client, "start_kernel")
    flag = tmp_path / "go"
    code = (
        f"import os, time\nfor i in range(200):\n    print(f'line {{i:03d}} of the long report')\n"
        f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.02)\nprint('report done')"
    )
    started = await call(client, "execute_code", code=code)
    line = parse_job_line(text_only_reading(started))
    assert line is not None and line.running and line.next_offset is not None
    assert_seen(started, f"[{line.job_id}: running, next_offset=", "poll_job", line.job_id)
    flag.touch()
    with anyio.fail_after(60):
        while (
            polled := parse_job_line(text_only_reading(await call(client, "poll_job", job_id=line.job_id)))
        ) and polled.running:
            await anyio.sleep(0.05)
    first = await call(client, "poll_job", job_id=line.job_id)
    page = parse_job_line(text_only_reading(first))
    assert page is not None and page.status == "ok" and page.next_offset is not None  # more than one page
    assert_seen(first, "line 000 of the long report", f"offset={page.next_offset}", f"[{line.job_id}: ok, next_offset=")
    pages = [text_only_reading(first)]
    while page.next_offset is not None:
        result = await call(client, "poll_job", job_id=line.job_id, offset=page.next_offset)
        next_page = parse_job_line(text_only_reading(result))
        assert next_page is not None
        pages.append(text_only_reading(result))
        page = next_page
    assert "report done" in pages[-1] and len(pages) >= 3


async def test_busy_paused_and_error_answers_name_the_next_step(
    served: tuple[Client, AppState], tmp_path: Path
) -> None:
    client, state = served
    await call(client, "start_kernel")
    flag = tmp_path / "go"
    job = await call(
        client, "execute_code", code=f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.02)"
    )
    line = parse_job_line(text_only_reading(job))
    assert line is not None and line.running
    busy = await call(client, "execute_code", code="1")
    assert busy.is_error
    assert_seen(busy, line.job_id, "poll_job", "interrupt_kernel")
    # the README's promise: an answer about a job ends with its job line (a busy one names the running job)
    busy_line = parse_job_line(text_only_reading(busy))
    assert busy_line is not None and (busy_line.job_id, busy_line.status) == (line.job_id, "running")
    assert_seen(await call(client, "inspect_object", path="os"), line.job_id)
    stopped = await call(client, "interrupt_kernel")
    assert_seen(stopped, line.job_id)
    link = state.kernel.link
    assert link is not None
    link.pause("checking the masks")  # what the scientist's %biopb pause writes
    try:
        paused = await call(client, "execute_code", code="x = 1")
        assert paused.is_error
        assert_seen(paused, "Paused by the scientist", "checking the masks", "%biopb resume")
        assert parse_job_line(text_only_reading(paused)) is None  # nothing was sent: no job, no line
    finally:
        link.resume()
    unknown = await call(client, "poll_job", job_id="job-999")
    assert unknown.is_error
    assert_seen(unknown, "job-999", "job-<N>")
    assert parse_job_line(text_only_reading(unknown)) is None  # no such job: no line to follow


async def test_doc_and_status_tools_are_text_in_every_reading(served: tuple[Client, AppState]) -> None:
    client, _ = served
    assert_seen(await call(client, "read_doc", id="index"), "## Procedures")
    assert_seen(await call(client, "search_docs", query="flat field"), "flatfield")
    written = await call(client, "write_doc", id="lab/readings-note", body="# Readings note\n\nKept by a test.\n")
    assert_seen(written, "lab/readings-note", "+# Readings note")
    bad = await call(client, "read_doc", id="../etc/passwd")
    assert bad.is_error
    assert_seen(bad, "..")
    assert_seen(await call(client, "server_status"), '"kernel"', '"state"')
    await call(client, "start_kernel")
    await run_to_end(client, "import numpy as np\nimg = np.zeros((512, 512))")
    assert_seen(await call(client, "inspect_object", path="img"), "shape", "(512, 512)")


async def test_a_call_cancelled_while_its_code_finishes_is_named_in_the_next_answer(
    served: tuple[Client, AppState],
) -> None:
    client, _ = served
    await call(client, "start_kernel")
    with anyio.move_on_after(0.3):  # the client gives up while the code still runs; it ends at 0.9 s
        await client.call_tool("execute_code", {"code": "import time\ntime.sleep(0.9)\nprint('finished quickly')"})
    with anyio.fail_after(60):
        while True:  # while it still runs, a call answers busy naming it; the first answer after names it too
            nxt = await call(client, "execute_code", code="print('second')")
            if not nxt.is_error:
                break
            assert_seen(nxt, "job-", "poll_job")
            await anyio.sleep(0.1)
    assert_seen(nxt, "a call of yours was cancelled, but its code went on as job-", "second")
