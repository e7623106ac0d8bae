"""What execute_code keeps and shows of big output, through a real MCP session and a real kernel:
memory bounded by bytes across executions (the rest saved to a file the answer names), the head
and the tail of long output, and progress bars at their last state."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _tests.support.isolation import isolated_vars
from _tests.support.results import text_of
from biopb_mcp.config.settings import load_settings
from biopb_mcp.kernel.notebook import agent_cells, read_session
from biopb_mcp.server import build_server
from biopb_mcp.text.kernel import parse_job_line

pytestmark = pytest.mark.anyio

MAX_KEPT = 262_144
"""kernel.max_kept_bytes here: one execution keeps a quarter of it, 64 KiB."""

MAX_CHARS = 2000
"""kernel.max_output_chars here."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """One server (and kernel) for the module, with small bounds set in its config file."""
    root = tmp_path_factory.mktemp("bounds")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in isolated_vars(root).items():
            mp.setenv(name, value)
        (root / "config").mkdir(exist_ok=True)
        (root / "config" / "config.toml").write_text(
            f"[kernel]\nmax_kept_bytes = {MAX_KEPT}\nmax_output_chars = {MAX_CHARS}\n", encoding="utf-8"
        )
        settings = load_settings()
        settings = replace(settings, kernel=replace(settings.kernel, promote_after=300.0))
        mcp, state = build_server(settings)
        try:
            yield mcp, state
        finally:
            state.kernel.shutdown()


@pytest.fixture
async def client(served: tuple[Any, Any]) -> AsyncIterator[Client]:
    async with Client(served[0], mode="legacy") as session:
        with anyio.fail_after(120):
            assert not (await session.call_tool("start_kernel", {})).is_error
            yield session


def kept(state: Any, job_id: str) -> int:
    """Bytes the server holds in memory for one execution (its transcript at its real cost)."""
    return int(state.kernel.jobs._executions[job_id].kept_bytes)


async def test_output_past_the_memory_bound_is_saved_to_a_file_the_answer_names(
    client: Client, served: tuple[Any, Any]
) -> None:
    state = served[1]
    # ~100,000 characters with an emoji on each line: Python stores them at 4 bytes each
    code = "for i in range(2000):\n    print(f'row {i:05d} \\U0001f642 ' + 'x' * 36)"
    result = await client.call_tool("execute_code", {"code": code})
    text = text_of(result)
    job = parse_job_line(text)
    assert job is not None and job.status == "ok", text
    assert kept(state, job.job_id) <= MAX_KEPT // 4
    match = re.search(
        r"\[chars (\d+)-(\d+) of the output \((\d+) chars\) were not kept in memory.*?saved in (\S+?);", text
    )
    assert match, text
    start, end, path = int(match.group(1)), int(match.group(2)), Path(match.group(4))
    whole = "".join(f"row {i:05d} \U0001f642 " + "x" * 36 + "\n" for i in range(2000))
    assert end == len(whole) and path.read_text(encoding="utf-8") == whole[start:]
    assert path.stat().st_mode & 0o077 == 0


async def test_a_huge_exception_message_is_kept_under_the_bound(client: Client, served: tuple[Any, Any]) -> None:
    state = served[1]
    result = await client.call_tool("execute_code", {"code": "raise ValueError('\\u00e9' * 1_000_000)"})
    text = text_of(result)
    job = parse_job_line(text)
    assert result.is_error and job is not None and job.status == "error", text[:500]
    assert "ValueError" in text
    assert kept(state, job.job_id) <= MAX_KEPT // 4 + 4096
    assert len(text.encode()) < state.settings.kernel.max_result_bytes


async def test_finished_executions_stay_within_the_bound_together_and_a_forgotten_one_names_the_notebook(
    client: Client, served: tuple[Any, Any]
) -> None:
    state = served[1]
    jobs = []
    for _ in range(8):
        text = text_of(await client.call_tool("execute_code", {"code": "print('\\u00e9' * 60_000)"}))
        line = parse_job_line(text)
        assert line is not None
        jobs.append(line.job_id)
    executions = state.kernel.jobs._executions
    assert sum(ex.kept_bytes for ex in executions.values() if ex.done.is_set()) <= MAX_KEPT
    assert jobs[0] not in executions and jobs[-1] in executions
    gone = text_of(await client.call_tool("poll_job", {"job_id": jobs[0]}))
    assert "session notebook" in gone and "max_kept_bytes" in gone, gone


async def test_long_output_shows_its_head_and_its_tail_and_where_the_middle_is(client: Client) -> None:
    code = "for i in range(3000):\n    print(f'line {i:04d}')\nprint('SUMMARY: 3000 lines')"
    text = text_of(await client.call_tool("execute_code", {"code": code}))
    job = parse_job_line(text)
    assert job is not None and job.next_offset is not None, text
    assert "line 0000" in text and "SUMMARY: 3000 lines" in text and "line 1500" not in text
    assert f'poll_job("{job.job_id}", offset={job.next_offset}) pages them' in text
    middle = text_of(await client.call_tool("poll_job", {"job_id": job.job_id, "offset": job.next_offset}))
    first = int(job.next_offset) // 10  # each line is 10 chars
    assert f"line {first:04d}" in middle or f"line {first + 1:04d}" in middle, middle[:300]


async def test_a_progress_bar_shows_its_last_state_in_the_answer_and_the_notebook(
    client: Client, served: tuple[Any, Any]
) -> None:
    state = served[1]
    code = (
        "from tqdm import tqdm\nfor _ in tqdm(range(50), mininterval=0, ncols=60, ascii=True):\n    pass\nprint('done')"
    )
    text = text_of(await client.call_tool("execute_code", {"code": code}))
    body = text.rsplit("\n", 1)[0]
    assert "\r" not in body, repr(body)
    bars = [line for line in body.splitlines() if "/50" in line]
    assert len(bars) == 1 and "50/50" in bars[0], body
    assert "[stderr]\n[" not in body and not body.rstrip().endswith("[stderr]")
    assert body.count("[stderr]") <= 1 and "done" in body

    recorder = state.kernel.recorder
    assert recorder is not None and recorder.flush()
    cell = agent_cells(read_session(recorder.path))[-1]
    streams = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    assert "\r" not in streams and streams.count("/50") == 1 and "50/50" in streams, repr(streams)
