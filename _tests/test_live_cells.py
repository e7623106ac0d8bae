"""The agent's cells appear live in the scientist's open notebook, end to end.

A real JupyterLab server with real-time collaboration on loopback (one for the module), notebooks
and kernels made through its REST API as the browser makes them, jupyter-nbmodel-client in the
browser's place in each notebook's room, ``%load_ext biopb_mcp`` run in the kernel over its
channels as the scientist's cell would, and biopb-mcp attached with ``--existing`` over real stdio.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from jupyter_client import BlockingKernelClient
from mcp import Client, StdioServerParameters

from _tests.support.jupyter_rtc import SCIENTIST_CELL, JupyterServer, Notebook, Opened, cells_of, require_rtc
from _tests.support.results import text_of
from _tests.support.runner import run_to_end
from _tests.support.screenshots import chromium, keep_for_guide, open_chromium

pytestmark = pytest.mark.anyio

FIGURE = (
    "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
    "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    require_rtc()
    jupyter = JupyterServer(tmp_path_factory.mktemp("live"))
    try:
        yield jupyter
    finally:
        jupyter.close()


async def open_notebook(server: JupyterServer, name: str, cells: list[dict[str, Any]]) -> AsyncIterator[Opened]:
    from jupyter_nbmodel_client import NbModelClient

    notebook = server.open_session(server.new_notebook(name, cells))
    kernel = BlockingKernelClient(connection_file=str(notebook.connection_file))
    kernel.load_connection_file()
    kernel.start_channels(hb=False)  # the heartbeat channel reports "dead" until its first beat
    try:
        kernel.wait_for_ready(timeout=90)
        async with NbModelClient(server.room_url(name)) as doc:
            opened = Opened(notebook, kernel, doc)
            loaded = opened.run("%load_ext biopb_mcp")
            assert "Live: the agent's cells will appear in this notebook" in loaded, loaded
            yield opened
    finally:
        kernel.stop_channels()


async def attach(server: JupyterServer, notebook: Notebook) -> AsyncIterator[Client]:
    """biopb-mcp --existing on the notebook's kernel, as the line %load_ext printed launches it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "biopb_mcp", "--existing", str(notebook.connection_file)],
        env={**os.environ, **server.env},
    )
    async with Client(params, mode="legacy", read_timeout_seconds=90) as client:
        started = await client.call_tool("start_kernel", {})
        assert not started.is_error and "attached" in text_of(started).lower(), text_of(started)
        yield client


@pytest.fixture(scope="module")
async def opened(server: JupyterServer) -> AsyncIterator[Opened]:
    async for nb in open_notebook(server, "analysis.ipynb", [SCIENTIST_CELL]):
        yield nb


@pytest.fixture(scope="module")
async def agent(server: JupyterServer, opened: Opened) -> AsyncIterator[Client]:
    async for client in attach(server, opened.notebook):
        yield client


async def until(doc: Any, wanted: Callable[[list[dict[str, Any]]], bool], within: float = 60) -> list[dict[str, Any]]:
    """The room's cells once ``wanted`` holds for them (the test fails after ``within`` s)."""
    cells = cells_of(doc)
    with anyio.fail_after(within):
        while not wanted(cells):
            await anyio.sleep(0.05)
            cells = cells_of(doc)
    return cells


def agent_cells(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cells if c.get("metadata", {}).get("biopb", {}).get("agent")]


def finished(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    """``count`` agent cells, the last one finished (its execution count set)."""

    def check(cells: list[dict[str, Any]]) -> bool:
        mine = agent_cells(cells)
        return len(mine) >= count and mine[count - 1].get("execution_count") is not None

    return check


def text_outputs(cell: dict[str, Any]) -> str:
    return "".join(str(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream")


async def test_the_agents_print_error_and_figure_appear_as_its_cells_beside_the_scientists(
    opened: Opened, agent: Client
) -> None:
    doc = opened.doc
    printed = await run_to_end(agent, "print('cells found:', 12)")
    assert "cells found: 12" in text_of(printed)
    cells = await until(doc, finished(1))
    first = agent_cells(cells)[0]
    assert first["source"].splitlines()[0].startswith("# [biopb agent] job-")
    assert first["source"].endswith("print('cells found:', 12)")
    assert first["metadata"]["biopb"]["job"] in first["source"].splitlines()[0]
    assert text_outputs(first) == "cells found: 12\n"

    # meanwhile the scientist edits their cell and adds one below the agent's
    index = next(i for i, c in enumerate(cells) if c["id"] == "scientist-1")
    doc.set_cell_source(index, "threshold = 0.7  # tuned while the agent works")
    doc.add_code_cell("summary = 'mine'")

    failed = await run_to_end(agent, "raise ValueError('no nuclei in this field')")
    assert "no nuclei" in text_of(failed)
    figure = await run_to_end(agent, FIGURE)
    assert not figure.is_error, text_of(figure)
    cells = await until(doc, finished(3))

    mine = agent_cells(cells)
    errors = [o for o in mine[1]["outputs"] if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "ValueError" and "no nuclei" in errors[0]["evalue"]
    images = [o for o in mine[2]["outputs"] if "image/png" in o.get("data", {})]
    assert images and images[0]["output_type"] == "display_data", mine[2]["outputs"]
    # the scientist's cells: unchanged by the agent, in their places; the agent's go after its last one
    assert cells[0]["id"] == "scientist-1" and cells[0]["source"] == "threshold = 0.7  # tuned while the agent works"
    assert cells[0]["metadata"].get("tags") == ["mine"] and cells[0]["outputs"] == []
    # the scientist's cell added while the agent worked keeps its place after the agent's first
    # cell; the agent's next cell goes after its last one, so it lands either before that cell or
    # after it (an insert at the same place as one not yet synced: the document orders the two)
    ids = [c["id"] for c in cells]
    assert len(cells) == 5 and [c["id"] for c in cells[1:] if c in mine] == [c["id"] for c in mine]
    theirs = [c for c in cells[1:] if c not in mine]
    assert [c["source"] for c in theirs] == ["summary = 'mine'"] and ids.index(theirs[0]["id"]) > ids.index(
        mine[0]["id"]
    )
    assert ids.index(mine[2]["id"]) == ids.index(mine[1]["id"]) + 1
    # the scientist's own run is not the agent's: no cell for it
    assert opened.run("print('scientist ran this')") == "scientist ran this\n"
    await run_to_end(agent, "print('fourth')")
    cells = await until(doc, finished(4))
    assert not any("scientist ran this" in c["source"] for c in cells)
    ids = [c["id"] for c in cells]
    fourth = next(i for i, c in enumerate(cells) if c["source"].endswith("print('fourth')"))
    assert fourth == ids.index(mine[2]["id"]) + 1 and len(cells) == 6  # right after the agent's last
    assert sum(c["source"] == "summary = 'mine'" for c in cells) == 1


async def test_the_source_shows_first_and_the_output_streams_in_while_the_code_runs(
    opened: Opened, agent: Client, tmp_path: Path
) -> None:
    go_on, finish = tmp_path / "go-on", tmp_path / "finish"
    code = (
        "import os, time\n"
        f"while not os.path.exists({str(go_on)!r}): time.sleep(0.02)\n"
        "print('tick 0', flush=True)\n"
        f"while not os.path.exists({str(finish)!r}): time.sleep(0.02)\n"
        "print('tick 1')"
    )

    def this(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next((c for c in agent_cells(cells) if c["source"].endswith(code)), None)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run_to_end, agent, code)
        cell = this(await until(opened.doc, lambda cells: this(cells) is not None))
        assert cell is not None and cell["outputs"] == [] and cell["execution_count"] is None
        go_on.touch()
        cell = this(await until(opened.doc, lambda cells: bool((this(cells) or {}).get("outputs"))))
        assert cell is not None and text_outputs(cell) == "tick 0\n" and cell["execution_count"] is None
        finish.touch()
    cell = this(await until(opened.doc, lambda cells: (this(cells) or {}).get("execution_count") is not None))
    assert cell is not None and text_outputs(cell) == "tick 0\ntick 1\n"


async def test_outputs_too_big_for_the_room_are_cut_and_the_room_stays_joined(opened: Opened, agent: Client) -> None:
    code = (
        "from IPython.display import display\n"
        "print('y' * 150_000)\n"
        "display({'text/html': '<b>' + 'x' * 5_000_000 + '</b>'}, raw=True)\n"
        "print('after')"
    )
    await run_to_end(agent, code)
    count = len(agent_cells(cells_of(opened.doc)))
    cell = agent_cells(await until(opened.doc, finished(count)))[-1]
    assert cell["source"].endswith(code)
    printed = text_outputs(cell)
    assert printed.startswith("y" * 1000) and "more output than is shown live" in printed and "after" not in printed
    assert len(printed) < 101_000
    rich = [o for o in cell["outputs"] if o["output_type"] == "display_data"]
    assert rich and "is not shown live; %biopb log shows it" in rich[0]["data"]["text/plain"], rich
    assert "text/html" not in rich[0]["data"]
    await run_to_end(agent, "print('still live')")
    assert agent_cells(await until(opened.doc, finished(count + 1)))[-1]["source"].endswith("print('still live')")


async def test_live_off_stops_the_cells_and_on_brings_them_back(opened: Opened, agent: Client) -> None:
    doc = opened.doc
    before = len(agent_cells(cells_of(doc)))
    assert "Live cells: off" in opened.run("%biopb live off")
    assert "Live cells: off" in opened.run("%biopb status")
    await run_to_end(agent, "print('not shown live')")
    assert "Live cells: on" in opened.run("%biopb live on")
    await run_to_end(agent, "print('shown again')")
    cells = await until(doc, finished(before + 1))
    assert not any("not shown live" in c["source"] for c in cells)
    assert agent_cells(cells)[before]["source"].endswith("print('shown again')")
    status = opened.run("%biopb status")
    assert "Live cells: on: the agent's cells appear in analysis.ipynb" in status, status
    assert "%biopb live takes on or off" in opened.run("%biopb live maybe")


async def test_two_notebooks_two_agents_each_writes_only_its_own(server: JupyterServer) -> None:
    async for left in open_notebook(server, "left.ipynb", [SCIENTIST_CELL]):
        async for right in open_notebook(server, "project/right.ipynb", [SCIENTIST_CELL]):  # in a folder
            async for left_agent in attach(server, left.notebook):
                async for right_agent in attach(server, right.notebook):
                    for i in range(2):
                        await run_to_end(left_agent, f"print('left agent', {i})")
                        await run_to_end(right_agent, f"print('right agent', {i})")
                    left_cells = await until(left.doc, finished(2))
                    right_cells = await until(right.doc, finished(2))
    assert [text_outputs(c) for c in agent_cells(left_cells)] == ["left agent 0\n", "left agent 1\n"]
    assert [text_outputs(c) for c in agent_cells(right_cells)] == ["right agent 0\n", "right agent 1\n"]


async def test_jupyterlab_in_a_browser_shows_the_agents_cell_its_output_and_marker(
    server: JupyterServer, opened: Opened, agent: Client, tmp_path: Path
) -> None:
    chromium()  # skip before the agent's work when there is no browser
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    await run_to_end(agent, "nuclei = [12, 15, 9]\nprint('nuclei per field:', nuclei)\n" + FIGURE.split("\n", 2)[2])
    count = len(agent_cells(cells_of(opened.doc)))
    await until(opened.doc, finished(count))

    def look() -> str:
        driver = open_chromium(tmp_path / "chromium-profile", 1280, 1000)
        try:
            driver.get(f"{server.url}/lab/tree/{opened.notebook.path}?token={server.token}&reset")
            wait = WebDriverWait(driver, 120, poll_frequency=0.5)
            wait.until(lambda d: "nuclei per field: [12, 15, 9]" in d.find_element(By.ID, "main").text)
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-RenderedImage img"))
            for button in driver.find_elements(By.XPATH, "//button[normalize-space()='No']"):
                button.click()  # JupyterLab's "notified about news?" toast would cover the cells
            with contextlib.suppress(TimeoutException):  # the picture only: the toast slides away
                WebDriverWait(driver, 10).until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".Toastify__toast"))
            last = driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")[-2]
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", last)
            shot = tmp_path / "notebook-live.png"
            driver.save_screenshot(str(shot))
            keep_for_guide(shot, "notebook-live-screenshot.png")  # the guide's notebook page shows it
            return str(driver.find_element(By.ID, "main").text)
        finally:
            driver.quit()

    shown = await anyio.to_thread.run_sync(look)
    assert "# [biopb agent] job-" in shown, shown[-2000:]
    assert "nuclei per field: [12, 15, 9]" in shown
    # the scientist's own cell, as it stands now (an earlier test in this module edits it)
    assert str(cells_of(opened.doc)[0]["source"]) in shown
