"""A result with big figures still reaches an HTTP client whole: under its 1 MiB event limit."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ImageContent, TextContent

from _tests.server.test_http import HttpServer, token_file_of
from biopb_mcp.kernel.rendering import png_size
from biopb_mcp.server.result_size import Fitted, fit_images
from biopb_mcp.text.kernel import parse_job_line

pytestmark = pytest.mark.slow

BIG_NOISY_FIGURES = """\
import numpy as np, matplotlib.pyplot as plt
rng = np.random.default_rng(0)
for _ in range(2):
    # 13 x 9 inches of noise: a PNG that barely compresses, over 1 MB
    fig = plt.figure(figsize=(13, 9), dpi=100)
    plt.imshow(rng.random((900, 1300)), cmap="viridis")
plt.show()
print("two figures drawn")
"""

CLIENT_EVENT_LIMIT = 1_048_576
"""The Python SDK client's limit for one server-sent event: a bigger reply is lost whole."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    running = HttpServer(tmp_path_factory.mktemp("size"))
    yield running
    running.stop()


@pytest.mark.anyio
async def test_big_figures_are_downscaled_to_fit_the_clients_limit_and_the_text_says_so(server: HttpServer) -> None:
    token = token_file_of(server.root, server.proc.pid).read_text().strip()
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=120) as http:
        with anyio.fail_after(240):
            async with Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client:
                assert not (await client.call_tool("start_kernel", {})).is_error
                result = await client.call_tool("execute_code", {"code": BIG_NOISY_FIGURES})
                while (line := parse_job_line(str(getattr(result.content[0], "text", "")))) and line.running:
                    await anyio.sleep(0.1)
                    result = await client.call_tool("poll_job", {"job_id": line.job_id})
    text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert "two figures drawn" in text and not result.is_error, text
    assert len(images) == 2, text
    assert "to keep this result under kernel.max_result_bytes=1000000 bytes" in text, text
    sent = len(result.model_dump_json(by_alias=True, exclude_none=True))
    assert sent < 1_000_000 < CLIENT_EVENT_LIMIT
    for image in images:
        assert png_size(base64.b64decode(image.data)) is not None
    # each full-size figure stays reachable in the file its placeholder names
    assert len([Path(p) for p in text.split("full size saved to ")[1:]]) == 2


def test_images_under_the_limit_are_kept_as_they_are() -> None:
    small = [b"\x89PNG" + bytes(1000), b"\x89PNG" + bytes(2000)]
    fitted = fit_images(500, small, 100_000)
    assert fitted == Fitted(small)


def test_an_image_that_cannot_be_shrunk_is_left_out_and_the_others_kept() -> None:
    not_a_png = b"\x89PNG" + bytes(90_000)  # no decodable picture: cannot be downscaled
    fitted = fit_images(1000, [b"\x89PNG" + bytes(10), not_a_png], 60_000)
    assert fitted.dropped == [2] and fitted.images == [b"\x89PNG" + bytes(10)]


def test_the_note_on_shrunk_images_stays_small_however_many_there_are() -> None:
    from biopb_mcp.text.kernel import fitted_note

    note = fitted_note([(i, (64, 48)) for i in range(1, 401)], [], 400, 1_000_000)
    assert len(note.encode()) < 400 and "400 of 400 attached images downscaled" in note


@pytest.mark.anyio
async def test_a_page_over_the_limit_is_shortened_and_says_where_the_rest_starts(tmp_path: Path) -> None:
    from _tests.support.isolation import make_settings
    from _tests.support.runner import run_to_end
    from biopb_mcp.server import build_server

    mcp, state = build_server(make_settings(tmp_path, kernel="max_output_chars = 2000000\n"))
    try:
        async with Client(mcp, mode="legacy") as client:
            await client.call_tool("start_kernel", {})
            for char, name in (("x", "plain"), ("\\x1b", "escape")):  # an ESC is 6 bytes in JSON
                result = await run_to_end(client, f"print('{char}' * 1999999)")
                sent = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
                text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                line = parse_job_line(text)
                assert sent < 1_000_000, (name, sent)
                assert line is not None and line.next_offset is not None and 0 < line.next_offset < 2_000_000, name
                assert f"offset={line.next_offset})" in text and "shortened" in text, name
    finally:
        state.kernel.shutdown()
