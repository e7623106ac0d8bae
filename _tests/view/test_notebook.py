"""The session notebook, recorded from a real image-analysis session through a real MCP client."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import struct
import time
from pathlib import Path
from typing import Any

import anyio
import nbformat
import numpy as np
import pytest
import tifffile

from _tests.support.processes import wait_gone
from _tests.support.results import text_of
from _tests.support.runner import run_to_end_raw
from _tests.support.stdio_procs import RawServer, make_env, result_text
from _tests.support.view_helpers import recording_server
from biopb_mcp.kernel.notebook import agent_cells, read_session

LOAD = (
    "import numpy as np, tifffile\n"
    "from skimage import filters, measure\n"
    "img = tifffile.imread('nuclei.tif')\n"
    "img.shape, str(img.dtype)"
)
SEGMENT = (
    "mask = img > filters.threshold_otsu(img)\n"
    "labels = measure.label(mask)\n"
    "areas = sorted(int(r.area) for r in measure.regionprops(labels))\n"
    "print('nuclei:', labels.max())\n"
    "print('areas:', areas)"
)
FIGURE = (
    "import imageio.v3 as iio\n"
    "from IPython.display import Image, display\n"
    "overlay = np.kron((labels * 60).astype(np.uint8), np.ones((4, 5), np.uint8))\n"
    "display(Image(iio.imwrite('<bytes>', overlay, extension='.png')))"
)
NOISY = "import sys\nprint('check the threshold', file=sys.stderr)\nprint('x' * 50000)"
FAILING = "areas[100]"
CODE = [LOAD, SEGMENT, FIGURE, NOISY, FAILING]


def nuclei_image(path: Path) -> None:
    """Four bright discs on a noisy background: Otsu finds exactly four objects."""
    yy, xx = np.mgrid[:128, :128]
    img = np.zeros((128, 128), np.float32)
    for cy, cx, r in [(20, 30, 6), (60, 80, 9), (100, 40, 7), (90, 100, 5)]:
        img[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = 100
    img += np.random.default_rng(7).normal(0, 5, img.shape).astype(np.float32)
    tifffile.imwrite(path, img)


async def record_session(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"texts": []}
    extra = "[kernel]\npromote_after = 300.0\nmax_image_bytes = 100\n[record]\nmax_output_chars = 5000\n"
    with anyio.fail_after(180):
        async with recording_server(root, extra) as (client, _state):  # cells read 'nuclei.tif' in root/data
            await client.call_tool("read_doc", {"id": "kernel"})  # before any kernel: opens the notebook
            out["start"] = text_of(await client.call_tool("start_kernel", {}))
            for code in CODE[:2]:
                out["texts"].append(text_of(await client.call_tool("execute_code", {"code": code})))
            await client.call_tool("read_doc", {"id": "measure-labels"})
            for code in CODE[2:]:
                out["texts"].append(text_of(await client.call_tool("execute_code", {"code": code})))
            body = "---\ntitle: Lab note\ndescription: what worked\n---\nOtsu on nuclei.tif found 4.\n"
            await client.call_tool("write_doc", {"id": "lab-note", "body": body})
            out["restart"] = text_of(await client.call_tool("restart_kernel", {}))
            await client.call_tool("execute_code", {"code": "'after restart'"})
            out["status"] = json.loads(text_of(await client.call_tool("server_status", {})))
    return out


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("session")
    (root / "data").mkdir()
    nuclei_image(root / "data" / "nuclei.tif")
    out = anyio.run(record_session, root)
    out["root"] = root
    books = sorted((root / "state" / "notebooks").glob("*.ipynb"))
    out["books"] = books
    out["nbs"] = [read_session(p) for p in books]
    return out


def png_of(outputs: list[Any]) -> bytes:
    return base64.b64decode(outputs[0].data["image/png"])


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def test_one_valid_notebook_per_kernel_start_linked_and_named_in_the_tool_results(session: dict[str, Any]) -> None:
    first, second = session["books"]  # one per kernel start
    for nb in session["nbs"]:
        nbformat.validate(nb)
        assert nb.nbformat == 4 and nb.metadata.kernelspec.name
    assert f"Session notebook: {first}" in session["start"]
    assert f"Session notebook: {second}" in session["restart"]
    assert session["status"]["kernel"]["session_notebook"] == str(second)
    nb1, nb2 = session["nbs"]
    assert nb1.cells[1].metadata.biopb.setup  # what a plain kernel lacks, before the agent's cells
    assert nb1.cells[2].cell_type == "markdown" and "**read_doc** `kernel`" in nb1.cells[2].source
    assert str(second) in nb1.cells[-1].source and nb1.cells[-1].cell_type == "markdown"
    assert str(first) in nb2.cells[0].source and nb2.cells[0].cell_type == "markdown"
    assert [c.source for c in agent_cells(nb2)] == ["'after restart'"]


def test_cells_in_order_with_their_outputs_full_size_images_and_doc_notes(session: dict[str, Any]) -> None:
    nb = session["nbs"][0]
    kinds = [(c.cell_type, c.source) for c in nb.cells]
    code = [src for kind, src in kinds if kind == "code"]
    assert code[1:] == CODE == [c.source for c in agent_cells(nb)]  # after the setup cell
    read_at = next(i for i, (k, s) in enumerate(kinds) if k == "markdown" and "`measure-labels`" in s)
    write_at = next(i for i, (k, s) in enumerate(kinds) if k == "markdown" and "write_doc" in s)
    assert kinds.index(("code", SEGMENT)) < read_at < kinds.index(("code", FIGURE))
    assert kinds.index(("code", FAILING)) < write_at
    assert "`measure-labels`" in kinds[read_at][1]
    assert "```diff" in kinds[write_at][1] and "+Otsu on nuclei.tif found 4." in kinds[write_at][1]

    cells = {c.source: c for c in nb.cells if c.cell_type == "code"}
    load = cells[LOAD].outputs
    assert [o.output_type for o in load] == ["execute_result"]
    assert "(128, 128)" in load[0].data["text/plain"] and load[0].execution_count == cells[LOAD].execution_count
    segment = cells[SEGMENT].outputs
    assert [o.output_type for o in segment] == ["stream"] and "nuclei: 4" in segment[0].text
    meta = cells[SEGMENT].metadata["biopb"]
    assert re.fullmatch(r"job-\d+", meta["job_id"]) and meta["status"] == "ok"

    # the figure: full size in the notebook, though too big for the agent (max_image_bytes 100)
    (image,) = cells[FIGURE].outputs
    assert image.output_type == "display_data"
    png = base64.b64decode(image.data["image/png"])
    assert png_size(png) == (640, 512)
    saved = re.search(r"full size saved to (\S+\.png)", session["texts"][2])
    assert saved, session["texts"][2]
    assert Path(saved.group(1)).read_bytes() == png

    noisy = {o.name: o.text for o in cells[NOISY].outputs}  # the kernel flushes the two in either order
    assert noisy["stderr"] == "check the threshold\n"
    assert noisy["stdout"].startswith("x" * 4000)
    assert len(noisy["stdout"]) < 6000 and "not recorded in the notebook" in noisy["stdout"]

    (error,) = cells[FAILING].outputs
    assert error.output_type == "error" and error.ename == "IndexError"
    assert cells[FAILING].metadata["biopb"]["status"] == "error"


def test_nbclient_re_runs_the_notebook_on_the_same_data_and_gets_the_recorded_results(
    session: dict[str, Any],
) -> None:
    from nbclient import NotebookClient

    nb = session["nbs"][0]
    recorded = {c.source: c.outputs for c in nb.cells if c.cell_type == "code"}
    fresh = nbformat.from_dict(json.loads(json.dumps(nb)))
    for cell in fresh.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(
        fresh,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(session["root"] / "data")}},
    ).execute()
    rerun = {c.source: c.outputs for c in fresh.cells if c.cell_type == "code"}
    assert rerun[LOAD][0].data["text/plain"] == recorded[LOAD][0].data["text/plain"]
    assert rerun[SEGMENT][0].text == recorded[SEGMENT][0].text
    assert base64.b64decode(rerun[FIGURE][0].data["image/png"]) == png_of(recorded[FIGURE])
    assert rerun[FAILING][0].ename == recorded[FAILING][0].ename == "IndexError"


def _cells_on_disk(path: Path) -> list[Any]:
    """The agent's cells the notebook file holds now (none while it cannot be read whole)."""
    try:
        return agent_cells(read_session(path))
    except (OSError, ValueError):
        return []


def test_a_sigkilled_server_leaves_a_valid_notebook_with_every_completed_cell(tmp_path: Path) -> None:
    config = f'[server]\nruntime_dir = "{tmp_path / "rt"}"\n[kernel]\npromote_after = 1.0\n'
    server = RawServer(make_env(tmp_path, config=config), tmp_path / "stderr.log")
    kernel_pid = None
    try:
        server.initialize()
        server.call("start_kernel")
        done = [f"step_{n} = {n} * 10\nprint('step', step_{n})" for n in range(3)]
        for code in done:  # each followed to its end: a loaded machine may promote any of them
            assert "step" in result_text(run_to_end_raw(server, code))
        running = result_text(server.call("execute_code", {"code": "import time\ntime.sleep(600)"}))
        assert "background" in running
        status = json.loads(result_text(server.call("server_status")))
        kernel_pid = status["kernel"]["pid"]
        path = Path(status["kernel"]["session_notebook"])
        # The writer thread appends each finished cell off the call's path: the kill comes once
        # the three are on disk, however long a loaded machine keeps the writer waiting.
        deadline = time.monotonic() + 60
        while len(_cells_on_disk(path)) < len(done):
            assert time.monotonic() < deadline, "the finished cells never reached the notebook"
            time.sleep(0.05)
        os.kill(server.proc.pid, signal.SIGKILL)  # mid-session: a job is running
        server.proc.wait(30)
        cells = agent_cells(read_session(path))
        assert [c.source for c in cells] == done
        assert [c.outputs[0].text for c in cells] == [f"step {n * 10}\n" for n in range(3)]
        assert not list(path.parent.glob(".*.tmp"))
    finally:
        server.close()
        if kernel_pid is not None:
            assert wait_gone(kernel_pid, 30)
