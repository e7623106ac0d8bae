"""look_at_viewer through a real MCP session, a real kernel and napari on a virtual display.

One server (in-process client) and its kernel are shared by the module, in order; the scientist
works beside the agent through a second Jupyter client on the same kernel, as a console does.
The last test joins a notebook's own kernel where the scientist opened napari themselves.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import numpy as np
import pytest
from jupyter_client import BlockingKernelClient
from mcp import Client
from mcp.types import CallToolResult, ImageContent
from PIL import Image

from _tests.support import seedlib
from _tests.support.isolation import make_settings
from _tests.support.notebook_kernel import NotebookKernel, Ran
from _tests.support.results import output_of, text_of
from _tests.support.screenshots import keep_for_guide
from _tests.support.xvfb import require_napari, virtual_display
from biopb_mcp.server import build_server
from biopb_mcp.server.result_size import encoded_size
from biopb_mcp.text.kernel import parse_job_line

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

T = TypeVar("T")

MAX_IMAGE_BYTES = 60_000
"""Small enough that a noisy screenshot must be downscaled, so the bound is exercised."""

CONFIG = f"promote_after = 1.0\nrequest_timeout = 60.0\nmax_image_bytes = {MAX_IMAGE_BYTES}\n"

CALL_BOUND = 120.0


@dataclass
class World:
    root: Path
    display: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A virtual display, and the environment the kernels (ours and the notebook's) start with."""
    require_napari()
    root = Path(tmp_path_factory.mktemp("viewer-tool"))
    with virtual_display() as display:
        env = {"DISPLAY": display, "XDG_CONFIG_HOME": str(root / "xdg-config")}
        mp = pytest.MonkeyPatch()
        for name, value in env.items():
            mp.setenv(name, value)
        mp.delenv("WAYLAND_DISPLAY", raising=False)
        mp.delenv("QT_QPA_PLATFORM", raising=False)
        try:
            yield World(root, display, env)
        finally:
            mp.undo()


@pytest.fixture(scope="module")
async def agent(world: World) -> AsyncIterator[tuple[Client, Any]]:
    """The agent's session with a server whose kernel (started by the tests) sees the display."""
    mcp, state = build_server(make_settings(world.root / "server", kernel=CONFIG))
    try:
        async with Client(mcp, mode="legacy") as client:
            yield client, state
    finally:
        await anyio.to_thread.run_sync(state.kernel.shutdown)


class Console:
    """The scientist's side: a second Jupyter client on the agent's kernel, as a console is.

    jupyter-client's blocking client runs a loop of the calling thread; every call goes through
    one thread of our own, whose loop ``close`` closes.
    """

    def __init__(self, connection_file: str) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console")
        self.client: BlockingKernelClient = self._call(self._connect, connection_file)

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return self._thread.submit(fn, *args).result()

    @staticmethod
    def _connect(connection_file: str) -> BlockingKernelClient:
        client = BlockingKernelClient()
        client.load_connection_file(connection_file)
        client.start_channels()
        client.wait_for_ready(timeout=60)
        return client

    def run(self, code: str) -> Ran:
        ran = Ran()
        self._call(lambda: self.client.execute_interactive(code, output_hook=ran.add, timeout=CALL_BOUND))
        assert ran.error is None, ran.error
        return ran

    def close(self) -> None:
        def stop() -> None:
            self.client.stop_channels()
            with contextlib.suppress(RuntimeError):
                asyncio.get_event_loop_policy().get_event_loop().close()

        try:
            self._call(stop)
        finally:
            self._thread.shutdown(wait=True)


async def call(client: Client, tool: str, **arguments: object) -> CallToolResult:
    with anyio.fail_after(CALL_BOUND):
        return await client.call_tool(tool, arguments)


async def run_code(client: Client, code: str) -> str:
    """execute_code's output, followed with poll_job to its end (a first viewer() can outlast promote_after)."""
    result = await call(client, "execute_code", code=code)
    while (line := parse_job_line(text_of(result))) is not None and line.running:
        await anyio.sleep(0.2)
        result = await call(client, "poll_job", job_id=line.job_id)
    assert not result.is_error, text_of(result)
    output = output_of(result)
    # a call that became a job (promote_after) reads back with a status line first
    return output.split("\n", 1)[1] if re.match(r"job-\d+: finished in ", output) else output


def screenshot(result: CallToolResult) -> np.ndarray:
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert len(images) == 1, text_of(result)
    with Image.open(io.BytesIO(base64.b64decode(images[0].data))) as img:
        return np.asarray(img.convert("RGB"))


async def as_scientist(client: Client, code: str) -> Ran:
    """Run ``code`` from a console of the scientist's on the agent's kernel (its file from server_status)."""
    status = json.loads(text_of(await call(client, "server_status")))
    console = await anyio.to_thread.run_sync(Console, status["kernel"]["connection_file"])
    try:
        return await anyio.to_thread.run_sync(console.run, code)
    finally:
        await anyio.to_thread.run_sync(console.close)


# -- the agent's kernel -------------------------------------------------------------------------------


async def test_before_start_it_names_start_kernel(agent: tuple[Client, Any]) -> None:
    client, _ = agent
    result = await call(client, "look_at_viewer")
    assert result.is_error and "start_kernel" in text_of(result), text_of(result)


async def test_with_no_viewer_it_says_how_to_open_one(agent: tuple[Client, Any]) -> None:
    client, _ = agent
    assert not (await call(client, "start_kernel")).is_error
    result = await call(client, "look_at_viewer")
    text = text_of(result)
    assert not result.is_error and not result.content[1:], text
    assert "No napari viewer is open in the kernel" in text and "v = viewer()" in text, text


async def test_a_huge_layer_name_is_shortened_and_the_screenshot_kept(agent: tuple[Client, Any]) -> None:
    """A name is free text: a long one is cut in the answer (saying how to read it whole), and
    the whole answer fits max_result_bytes with the screenshot attached."""
    client, state = agent
    await call(client, "start_kernel")
    await run_code(
        client, "import numpy as np\nvn = viewer()\nvn.add_image(np.zeros((32, 32)), name='n' * 100_000 + ' end')"
    )
    result = await call(client, "look_at_viewer")
    text = text_of(result)
    assert len(text) < 5000, len(text)
    assert "(100004 characters)" in text and ".layers[i].name" in text, text
    assert screenshot(result).size > 0
    assert encoded_size(result) <= state.settings.kernel.max_result_bytes
    await run_code(client, "vn.layers.clear()")  # (Qt in the kernel has crashed on such a name later on)


async def test_the_screenshot_shows_each_layer_in_its_colour_where_it_lies(agent: tuple[Client, Any]) -> None:
    client, state = agent
    await run_code(
        client,
        (
            "import numpy as np\n"
            "raw = np.zeros((200, 300), np.float32); raw[:, 150:] = 1.0   # dark left half, bright right half\n"
            "nuclei = np.zeros((200, 300), np.int32)\n"
            "nuclei[60:120, 40:100] = 1; nuclei[60:120, 200:260] = 2\n"
            "v = viewer()\n"
            "v.add_image(raw, name='raw')\n"
            "v.add_labels(nuclei, name='nuclei', opacity=1.0)\n"
            "v.reset_view()"
        ),
    )
    facts = json.loads(
        await run_code(
            client,
            (
                "import json\n"
                "print(json.dumps({'center': list(v.camera.center)[-2:], 'zoom': v.camera.zoom,\n"
                "                  'colors': [v.layers['nuclei'].get_color(i).tolist() for i in (1, 2)]}))"
            ),
        )
    )
    result = await call(client, "look_at_viewer")
    text = text_of(result)
    assert not result.is_error, text
    assert "- raw: image, shape (200, 300) float32, visible, contrast limits 0–1, colormap gray" in text, text
    assert "- nuclei (selected): labels, shape (200, 300) int32, visible, 2 labels" in text, text
    pixels = screenshot(result)
    height, width = pixels.shape[:2]
    (cy, cx), zoom = facts["center"], facts["zoom"]

    def at(y: float, x: float) -> np.ndarray:
        return pixels[round(height / 2 + (y - cy) * zoom), round(width / 2 + (x - cx) * zoom)].astype(int)

    for label, (y, x) in ((1, (90, 70)), (2, (90, 230))):
        expected = np.round(np.array(facts["colors"][label - 1][:3]) * 255)
        assert np.abs(at(y, x) - expected).max() <= 10, (label, at(y, x), expected)
    assert at(170, 250).min() >= 245, "bright half of the image, no label: white"
    assert at(170, 50).max() <= 10, "dark half of the image, no label: black"
    # every image is saved, and the text names the file (a text-only host still reaches it)
    saved = Path(text.split("saved to ")[1].split("]")[0])
    assert saved.parent == Path(state.settings.state_dir) / "images" and saved.read_bytes().startswith(b"\x89PNG")


async def test_the_whole_window_shows_more_than_the_canvas(agent: tuple[Client, Any]) -> None:
    client, _ = agent
    canvas = screenshot(await call(client, "look_at_viewer"))
    result = await call(client, "look_at_viewer", whole_window=True)
    window = screenshot(result)
    assert "the whole window" in text_of(result)
    assert window.shape[0] > canvas.shape[0] and window.shape[1] > canvas.shape[1]


async def test_points_the_scientist_adds_are_what_the_agent_reads_back(agent: tuple[Client, Any]) -> None:
    client, _ = agent
    # the scientist clicks two seeds into a new points layer (here: typed in their console)
    await as_scientist(client, "viewer().add_points([[30, 45], [150, 240]], name='seeds')")
    text = text_of(await call(client, "look_at_viewer"))
    assert "- seeds (selected): points, 2 points, visible" in text, text
    assert 'viewer().layers["name"].data' in text, text
    read = await run_code(client, "print(viewer().layers['seeds'].data.tolist())")
    assert json.loads(read) == [[30, 45], [150, 240]], read


async def test_a_window_the_scientist_closes_is_noticed_and_viewer_opens_a_new_one(agent: tuple[Client, Any]) -> None:
    client, _ = agent
    await as_scientist(client, "viewer().close()")
    closed = text_of(await call(client, "look_at_viewer"))
    assert "No napari viewer is open in the kernel" in closed, closed
    assert await run_code(client, "v2 = viewer()\nprint(v2 is v, len(v2.layers))") == "False 0"
    reopened = await call(client, "look_at_viewer")
    assert "No layers yet." in text_of(reopened) and screenshot(reopened).size > 0


async def test_a_big_screenshot_is_downscaled_to_the_image_bound_and_said_so(agent: tuple[Client, Any]) -> None:
    client, state = agent
    await run_code(client, "v2.add_image(np.random.default_rng(0).random((900, 1200)), name='noise')")
    result = await call(client, "look_at_viewer", whole_window=True)
    text = text_of(result)
    assert f"max_image_bytes={MAX_IMAGE_BYTES}; attached downscaled to" in text, text
    assert len(base64.b64decode(next(b for b in result.content if isinstance(b, ImageContent)).data)) <= MAX_IMAGE_BYTES
    assert encoded_size(result) <= state.settings.kernel.max_result_bytes


async def test_the_viewer_doc_runs_as_written(agent: tuple[Client, Any]) -> None:
    client, _ = agent
    await run_code(
        client,
        "image = np.random.default_rng(1).random((64, 80))\n"
        "labels = np.zeros((64, 80), np.int32); labels[10:20, 10:20] = 1",
    )
    printed = ""
    for block in seedlib.code_blocks(seedlib.read("viewer")):
        printed = await run_code(client, block)
    assert printed == "0 seeds; 1 labels; 0 regions", printed
    text = text_of(await call(client, "look_at_viewer"))
    for name in ("dapi", "nuclei (otsu)", "seeds", "regions", "nuclei corrected"):
        assert f"- {name}" in text, text


async def test_lazy_and_multiscale_layers_are_described_without_reading_them(agent: tuple[Client, Any]) -> None:
    client, _ = agent
    await run_code(
        client,
        (
            "import dask.array as da\n"
            "v3 = viewer()\n"
            "v3.add_image(da.zeros((4, 256, 256), chunks=(1, 128, 128)), name='lazy stack', contrast_limits=(0, 1))\n"
            "v3.add_image([np.zeros((256, 256)), np.zeros((128, 128))], multiscale=True, name='pyramid')\n"
            "v3.add_labels(da.zeros((4, 256, 256), dtype=np.int32, chunks=(1, 128, 128)), name='lazy labels')"
        ),
    )
    text = text_of(await call(client, "look_at_viewer"))
    assert "- lazy stack: image, shape (4, 256, 256) float64, lazy (dask.array.core.Array)" in text, text
    assert "- pyramid: image, shape (256, 256) float64, multiscale, 2 levels" in text, text
    assert "labels not counted (large or lazy)" in text, text
    assert "sliders: axis 0 at " in text and " of 4." in text, text
    await run_code(client, "v3.layers.clear()")


async def test_while_a_job_runs_it_answers_busy_naming_the_job(agent: tuple[Client, Any], world: World) -> None:
    client, _ = agent
    flag = world.root / "release-job"
    started = await call(
        client,
        "execute_code",
        code=(f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.05)\nprint('released')"),
    )
    line = parse_job_line(text_of(started))
    assert line is not None and line.running, text_of(started)
    try:
        busy = await call(client, "look_at_viewer")
        assert busy.is_error and "Busy" in text_of(busy) and line.job_id in text_of(busy), text_of(busy)
    finally:
        flag.touch()
    result = await call(client, "poll_job", job_id=line.job_id)
    while (follow := parse_job_line(text_of(result))) is not None and follow.running:
        await anyio.sleep(0.2)
        result = await call(client, "poll_job", job_id=line.job_id)
    assert "released" in text_of(result)


# -- the scientist's own notebook kernel ------------------------------------------------------------------


async def test_the_guides_picture_is_a_nuclei_image_with_its_labels_as_look_at_viewer_returns_it(
    agent: tuple[Client, Any],
) -> None:
    """The guide's viewer picture is the window this call returns (kept with BIOPB_UPDATE_SCREENSHOTS=1)."""
    client, _ = agent
    facts = json.loads(
        await run_code(
            client,
            (
                "import json\n"
                "import numpy as np\n"
                "from scipy import ndimage as ndi\n"
                "from skimage import filters, measure, segmentation\n"
                "rng = np.random.default_rng(3)\n"
                "yy, xx = np.mgrid[:360, :480]\n"
                "dapi = np.zeros((360, 480), np.float32)\n"
                "for cy, cx in rng.uniform((30, 30), (330, 450), (28, 2)):\n"
                "    r = rng.uniform(12, 20)\n"
                "    dapi += np.exp(-(((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r)) ** 2)\n"
                "dapi = ndi.gaussian_filter(dapi + rng.normal(0, 0.03, dapi.shape), 1).astype(np.float32)\n"
                "nuclei = measure.label(segmentation.clear_border(dapi > filters.threshold_otsu(dapi)))\n"
                "guide = viewer()\n"
                "for name in [layer.name for layer in guide.layers]:\n"
                "    guide.layers.remove(name)\n"
                "guide.add_image(dapi, name='DAPI', colormap='gray')\n"
                "guide.add_labels(nuclei, name='nuclei', opacity=0.45)\n"
                "guide.reset_view()\n"
                "print(json.dumps({'labels': int(nuclei.max())}))"
            ),
        )
    )
    result = await call(client, "look_at_viewer", whole_window=True)
    text = text_of(result)
    assert not result.is_error, text
    assert "- DAPI: image, shape (360, 480) float32, visible" in text, text
    assert f"- nuclei (selected): labels, shape (360, 480) int32, visible, {facts['labels']} labels" in text, text
    window = screenshot(result)
    assert facts["labels"] >= 10 and window.std() > 10, "a picture with content, not a blank window"
    keep_for_guide(Path(text.split("saved to ")[1].split("]")[0]), "viewer-screenshot.png")


async def test_in_a_joined_notebook_kernel_it_finds_the_scientists_own_viewer(world: World) -> None:
    jupyter_rt = world.root / "jupyter-runtime"
    jupyter_rt.mkdir(mode=0o700)
    notebook = await anyio.to_thread.run_sync(
        lambda: NotebookKernel({**world.env, "JUPYTER_RUNTIME_DIR": str(jupyter_rt)}, jupyter_rt / "kernel-nb.json")
    )
    try:
        ran = await anyio.to_thread.run_sync(
            notebook.run,
            (
                "%gui qt\nimport napari, numpy as np\nsv = napari.Viewer()\n"
                "sv.add_image(np.ones((64, 64)), name='scientist-image')"
            ),
        )
        assert ran.error is None, ran.error
        settings = make_settings(
            world.root / "attached",
            kernel=f'existing = "{notebook.connection_file}"\nrequest_timeout = 30.0\npromote_after = 20.0\n',
        )
        mcp, state = build_server(settings)
        try:
            async with Client(mcp, mode="legacy") as client:
                assert not (await call(client, "start_kernel")).is_error
                result = await call(client, "look_at_viewer")
                # Back-to-back requests: ipykernel idling in Qt's loop can miss one that lands as it
                # re-enters the loop; one not begun soon is followed by a message that wakes it, and
                # the wake-up poll given at join takes in one no message could wake it for
                for i in range(40):
                    for again in (
                        await call(client, "look_at_viewer"),
                        await call(client, "inspect_object", path="sv"),
                        await call(client, "execute_code", code=f"n = {i}"),
                    ):
                        assert not again.is_error and "running" not in text_of(again), text_of(again)
        finally:
            await anyio.to_thread.run_sync(state.kernel.shutdown)
        text = text_of(result)
        assert not result.is_error and "- scientist-image (selected): image, shape (64, 64)" in text, text
        assert 'napari.current_viewer().layers["name"].data' in text, text  # no viewer() in their namespace
        assert screenshot(result).size > 0
        leftover = await anyio.to_thread.run_sync(notebook.run, "print(sorted(n for n in dir() if 'biopb' in n))")
        assert leftover.stdout == "[]\n", "the look leaves no name in the scientist's namespace"
        # zmq can leave a request unread with no later message waking Qt's loop: only this poll does
        waking = await anyio.to_thread.run_sync(
            notebook.run, "print(get_ipython().kernel._biopb_wake_timer.isActive())"
        )
        assert waking.stdout == "True\n", waking
    finally:
        await anyio.to_thread.run_sync(notebook.close)
