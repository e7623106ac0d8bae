"""The real server over real stdio, through the SDK client, in both protocol eras, with a real kernel.

One server per era is shared by the module (spawning and starting a kernel is the slow part);
each test leaves the kernel usable (start_kernel is idempotent and every test calls it).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, ImageContent

from _tests.support.results import text_of
from _tests.support.runner import run_to_end
from _tests.support.stdio_procs import make_env, stdio_params
from biopb_mcp.docs.store import DocStore
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index
from biopb_mcp.text.kernel import parse_job_line, split_job_line

pytestmark = pytest.mark.anyio

NOISY_PLUGIN = """\
import os
print("plugin says hello on stdout")
os.write(1, b"plugin raw fd write\\n")
NOISY_PLUGIN_VALUE = 7
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=["legacy", "auto"])
async def session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Client, Path]]:
    root = tmp_path_factory.mktemp(f"stdio-{request.param}")
    env = make_env(root, config="[kernel]\npromote_after = 1.0\n", plugins={"noisy.py": NOISY_PLUGIN})
    async with Client(stdio_params(env), mode=request.param, read_timeout_seconds=90) as client:
        yield client, root


async def run(client: Client, code: str) -> CallToolResult:
    with anyio.fail_after(90):
        return await client.call_tool("execute_code", {"code": code})


async def started(client: Client) -> None:
    with anyio.fail_after(90):
        result = await client.call_tool("start_kernel", {})
    assert not result.is_error, text_of(result)


def tiny_png() -> bytes:
    """A valid 2x2 RGB PNG made without PIL or matplotlib."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


async def test_initialize_carries_the_rendered_index(session: tuple[Client, Path]) -> None:
    client, root = session
    instructions = client.instructions or ""
    rendered = render_index(DocStore(root / "config" / "docs")).strip()
    assert rendered and rendered in instructions
    assert instructions.index("start_kernel") < instructions.index(rendered)
    start = await client.call_tool("start_kernel", {})
    assert rendered not in text_of(start)


async def test_namespace_print_and_result(session: tuple[Client, Path]) -> None:
    client, _ = session
    await started(client)
    assert not (await run_to_end(client, "kept = 41")).is_error
    result = await run_to_end(client, "print('hello from the kernel')\nkept + 1")
    assert not result.is_error
    text = text_of(result)
    assert "hello from the kernel" in text and "42" in text


async def test_exception_is_the_error_not_a_crash(session: tuple[Client, Path]) -> None:
    client, _ = session
    await started(client)
    result = await run_to_end(client, "def f():\n    return 1 / 0\nf()")
    assert result.is_error
    text = text_of(result)
    assert "ZeroDivisionError" in text and "division by zero" in text
    assert "\x1b[" not in text and "Error executing tool" not in text
    assert "2" in text_of(await run_to_end(client, "1 + 1"))


async def test_png_display_comes_back_as_image_content(session: tuple[Client, Path]) -> None:
    client, _ = session
    await started(client)
    png = tiny_png()
    code = f"from IPython.display import Image, display\ndisplay(Image(data={png!r}))\nprint('shown')"
    result = await run_to_end(client, code)
    assert not result.is_error, text_of(result)
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    assert base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "shown" in text_of(result)


async def test_150_images_in_one_call_attach_at_most_max_images_and_name_the_rest_as_files(
    session: tuple[Client, Path],
) -> None:
    client, _ = session
    await started(client)
    code = f"from IPython.display import Image, display\nfor _ in range(150):\n    display(Image(data={tiny_png()!r}))"
    result = await run_to_end(client, code)
    assert not result.is_error, text_of(result)
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert len(images) == 10  # kernel.max_images, the default
    text, line = split_job_line(text_of(result))
    # a first page too long shows its head, a note and its tail: keep the head, page on from it
    head, cut, _tail = text.partition("\n[output truncated: showing chars ")
    text = head + "\n[the note]" if cut else text
    while line is not None and line.next_offset is not None:
        polled = await client.call_tool("poll_job", {"job_id": line.job_id, "offset": line.next_offset})
        assert not [block for block in polled.content if isinstance(block, ImageContent)]
        # pages are exact slices: drop the truncation note, then the next page's two header lines
        page, line = split_job_line(text_of(polled))
        text = text.rsplit("\n", 1)[0] + page.split("\n", 2)[2]
    saved = re.findall(r"not attached \(max_images=10 per execution reached\); full size saved to (\S+\.png)\]", text)
    assert len(saved) == 140 and len(set(saved)) == 140
    assert all(Path(path).read_bytes() == tiny_png() for path in saved)


async def test_long_run_becomes_a_job_that_poll_and_interrupt_handle(session: tuple[Client, Path]) -> None:
    client, _ = session
    await started(client)
    result = await run(client, "import time\nprint('started', flush=True)\ntime.sleep(30)")
    assert not result.is_error, text_of(result)
    text = text_of(result)
    assert "job-" in text and "poll_job" in text
    job_id = "job-" + text.split("job-", 1)[1].split()[0].rstrip(".:;,)\"'")
    # the facts a client follows the job by: the text's fixed last line, and no structured content
    # (several hosts would show the model only that)
    line = parse_job_line(text)
    assert result.structured_content is None and line is not None
    assert line.job_id == job_id and line.status == "running" and isinstance(line.next_offset, int)
    polled = await client.call_tool("poll_job", {"job_id": job_id})
    assert "running" in text_of(polled)
    assert polled.structured_content is None and (parse_job_line(text_of(polled)) or line).status == "running"
    busy = await run(client, "1")
    assert busy.is_error and job_id in text_of(busy)
    with anyio.fail_after(60):  # interrupt once the code runs: earlier, none of it would have run
        while "started" not in text_of(await client.call_tool("poll_job", {"job_id": job_id})):
            await anyio.sleep(0.1)
    interrupted = await client.call_tool("interrupt_kernel", {})
    assert not interrupted.is_error, text_of(interrupted)
    with anyio.fail_after(20):
        while "running" in (final := text_of(await client.call_tool("poll_job", {"job_id": job_id}))).split("\n", 1)[0]:
            await anyio.sleep(0.1)
    assert "interrupted" in final and "KeyboardInterrupt" in final
    ended = parse_job_line(text_of(await client.call_tool("poll_job", {"job_id": job_id})))
    assert ended is not None and ended.status == "interrupted" and ended.next_offset is None
    assert "2" in text_of(await run_to_end(client, "1 + 1"))


async def test_restart_loses_a_variable(session: tuple[Client, Path]) -> None:
    client, _ = session
    await started(client)
    await run_to_end(client, "doomed = 5")
    with anyio.fail_after(90):
        restarted = await client.call_tool("restart_kernel", {})
    assert not restarted.is_error and "lost" in text_of(restarted).lower()
    result = await run_to_end(client, "doomed")
    assert result.is_error and "NameError" in text_of(result)


async def test_kernel_death_is_reported_and_start_kernel_recovers(session: tuple[Client, Path]) -> None:
    client, _ = session
    await started(client)
    await run_to_end(client, "import os\nos._exit(1)")
    with anyio.fail_after(30):
        while json.loads(text_of(await client.call_tool("server_status", {})))["kernel"]["state"] != "dead":
            await anyio.sleep(0.1)
    after = await run_to_end(client, "1 + 1")
    assert after.is_error
    assert "dead" in text_of(after) and "start_kernel" in text_of(after)
    await started(client)
    assert "2" in text_of(await run_to_end(client, "1 + 1"))


async def test_a_plugin_that_prints_at_load_leaves_the_session_working(session: tuple[Client, Path]) -> None:
    client, _ = session
    await started(client)
    result = await run_to_end(client, "NOISY_PLUGIN_VALUE * 6")
    assert not result.is_error and "42" in text_of(result)
    status = text_of(await client.call_tool("server_status", {}))
    assert "noisy" in status


async def test_doc_round_trip_with_the_stores_errors(session: tuple[Client, Path]) -> None:
    client, root = session
    twin = DocStore(root / "config" / "docs")
    written = await client.call_tool("write_doc", {"id": "lab/notes", "body": "# Lab notes\n\nstdio line\n"})
    assert not written.is_error and "stdio line" in text_of(written)
    read = await client.call_tool("read_doc", {"id": "lab/notes"})
    assert text_of(read) == read_doc(twin, "lab/notes")
    for bad in ("lab/nots", "../x"):
        with pytest.raises(Exception) as expected:
            read_doc(twin, bad)
        result = await client.call_tool("read_doc", {"id": bad})
        assert result.is_error and str(expected.value) in text_of(result)


async def test_a_hand_edit_of_the_index_shows_in_the_next_session(tmp_path: Path) -> None:
    """Session one (handshake era), a hand edit, session two (2026 era): the edit is in its instructions."""
    env = make_env(tmp_path)
    index = tmp_path / "config" / "docs" / "index.md"
    seen: list[str] = []
    for mode in ("legacy", "auto"):
        with anyio.fail_after(60):
            async with Client(stdio_params(env), mode=mode, read_timeout_seconds=60) as client:
                seen.append(client.instructions or "")
        index.write_text(index.read_text() + "\n- hand-marker: when the user asks for the hand marker\n")
    assert "hand-marker" not in seen[0]
    assert "- hand-marker: when the user asks for the hand marker" in seen[1]
