"""Procedures as MCP prompts, completions, and write_doc's section, through real MCP clients.

In-process in both protocol eras (``mode="legacy"``: the handshake; the default: 2026-07-28),
over the real server ``build_server`` wires; one test over stdio; one with a real kernel.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.server.subscriptions import PromptsListChanged
from mcp.types import (
    EmbeddedResource,
    PromptListChangedNotification,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

from _tests.support.prepared_trees import prepare_tree
from _tests.support.results import text_of
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.resources import DOC_URI_TEMPLATE
from biopb_mcp.docs.store import DocStore
from biopb_mcp.kernel.states import KernelState
from biopb_mcp.server import build_server
from biopb_mcp.server.prompts.completions import Completions
from biopb_mcp.server.prompts.handlers import ProcedurePrompts, prompt_name
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.docs import FOR_AGENT

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
WAIT = 30.0  # bound on any awaited event; passing runs take well under a second each
REFERENCES = {"kernel", "data", "outputs", "authoring"}
TEMPLATE = ResourceTemplateReference(type="ref/resource", uri=DOC_URI_TEMPLATE)

COUNT_CELLS = """---
description: count cells in a phase-contrast image
---
# Count cells

## Inputs
- `image` (required): the phase-contrast image file.
- `min_area_px`: smallest cell, in pixels.

## Steps
1. Threshold, 2. label, 3. count.
"""


@pytest.fixture
def built(isolated_dirs: Path) -> Iterator[tuple[Any, Any]]:
    """The real server over the seeded tree of the isolated config dir."""
    mcp, state = build_server(load_settings())
    yield mcp, state
    state.kernel.shutdown()


@pytest.fixture
def docs_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    """The real server over the bench's docs-off tree (every Procedures entry withheld)."""
    tree = prepare_tree(tmp_path / "docs-off", bench_docs=False)
    monkeypatch.setenv("BIOPB_CONFIG_DIR", str(tree.root))
    mcp, state = build_server(load_settings())
    yield mcp, state
    state.kernel.shutdown()


class PromptInbox:
    """A legacy client's ``prompts/list_changed`` notifications."""

    def __init__(self) -> None:
        self.count = 0
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, PromptListChangedNotification):
            self.count += 1
            self._arrived.set()

    async def wait(self, count: int) -> None:
        with anyio.fail_after(WAIT):
            while self.count < count:
                await self._arrived.wait()
                self._arrived = anyio.Event()


@pytest.mark.parametrize("mode", MODES)
async def test_the_seeded_tree_lists_the_procedures_and_none_of_the_references(built: Any, mode: str) -> None:
    mcp, _ = built
    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            caps = client.server_capabilities
            assert caps.prompts is not None and caps.prompts.list_changed is True
            assert caps.completions is not None
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert {"flatfield", "segment-nuclei", "large-image", "count-spots"} <= set(prompts)
    assert not REFERENCES & set(prompts)
    nuclei = prompts["segment-nuclei"]
    assert (
        nuclei.title == "Segment nuclei" and nuclei.description and nuclei.description.startswith("count and outline")
    )
    assert [(a.name, a.required) for a in nuclei.arguments or []] == [
        ("image", False),
        ("nucleus_diameter_px", False),
        ("exclude_edge", False),
    ]
    assert all(p.description for p in prompts.values())


@pytest.mark.parametrize("mode", MODES)
async def test_the_docs_off_tree_serves_no_prompt_and_does_not_advertise_prompts(docs_off: Any, mode: str) -> None:
    mcp, _ = docs_off
    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            assert client.server_capabilities.prompts is None
            assert (await client.list_prompts()).prompts == []
            with pytest.raises(MCPError) as exc_info:
                await client.get_prompt("segment-nuclei", {})
            assert exc_info.value.error.code == -32602
            # nor does a completion reach a hidden procedure
            found = (await client.complete(TEMPLATE, {"name": "id", "value": ""})).completion.values
    assert "segment-nuclei" not in found and "flatfield" not in found and "kernel" in found


@pytest.mark.parametrize("mode", MODES)
async def test_get_segment_nuclei_returns_the_request_and_the_doc_embedded(built: Any, mode: str) -> None:
    mcp, state = built
    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            got = await client.get_prompt("segment-nuclei", {"image": "plate1/cells.tif", "exclude_edge": "True"})
    assert got.description and got.description.startswith("count and outline nuclei")
    request, doc = got.messages
    assert request.role == "user" and doc.role == "user"
    assert isinstance(request.content, TextContent)
    text = request.content.text
    assert '"Segment nuclei"' in text and "- image: plate1/cells.tif" in text and "- exclude_edge: True" in text
    assert "Not given here: nucleus_diameter_px" in text
    assert isinstance(doc.content, EmbeddedResource) and isinstance(doc.content.resource, TextResourceContents)
    assert doc.content.resource.uri == "biopb://docs/segment-nuclei"
    assert doc.content.resource.mime_type == "text/markdown"
    assert doc.content.resource.text == read_doc(state.store, "segment-nuclei", FOR_AGENT)


@pytest.mark.parametrize("mode", MODES)
async def test_a_local_procedure_is_a_prompt_once_filed_and_a_missing_required_argument_is_named(
    built: Any, mode: str
) -> None:
    """The lab's own procedure, filed under Procedures by one write_doc(..., section=...):
    a prompt named safely for hosts (`/` -> `.`), whose required argument is enforced."""
    mcp, _ = built
    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            written = await client.call_tool(
                "write_doc", {"id": "lab/count-cells", "body": COUNT_CELLS, "section": "Procedures"}
            )
            assert not written.is_error, text_of(written)
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert prompt_name("lab/count-cells") == "lab.count-cells" in prompts
            assert [(a.name, a.required) for a in prompts["lab.count-cells"].arguments or []] == [
                ("image", True),
                ("min_area_px", False),
            ]
            for arguments, said in (
                ({}, "'image'"),
                ({"image": "  "}, "'image'"),
                ({"image": "a.tif", "sigma": "2"}, "'sigma'"),
            ):
                with pytest.raises(MCPError) as exc_info:
                    await client.get_prompt("lab.count-cells", arguments)
                assert exc_info.value.error.code == -32602
                assert said in exc_info.value.error.message and "lab.count-cells" in exc_info.value.error.message
            got = await client.get_prompt("lab.count-cells", {"image": "a.tif"})
    resource = got.messages[1].content
    assert isinstance(resource, EmbeddedResource) and resource.resource.uri == "biopb://docs/lab/count-cells"


@pytest.mark.parametrize("mode", MODES)
async def test_an_index_edit_that_adds_a_procedure_line_sends_prompts_list_changed(built: Any, mode: str) -> None:
    """A write that leaves the prompt set as it was sends nothing; the one that adds a procedure
    line sends one list_changed (in order on the one connection: the count proves it), and the
    next list has it."""
    mcp, state = built
    inbox = PromptInbox()
    (state.store.local_dir / "lab").mkdir(parents=True)
    (state.store.local_dir / "lab" / "count-cells.md").write_text(COUNT_CELLS)  # on disk, not listed yet
    add_line = {"id": "index", "old": "## Procedures\n", "new": "## Procedures\n- lab/count-cells: count cells\n"}
    with anyio.fail_after(WAIT):
        if mode == "legacy":
            async with Client(mcp, mode=mode, cache=None, message_handler=inbox) as client:
                before = [p.name for p in (await client.list_prompts()).prompts]
                assert not (
                    await client.call_tool("write_doc", {"id": "kernel", "body": "# Kernel\n\nMine.\n"})
                ).is_error
                assert not (await client.call_tool("write_doc", add_line)).is_error
                await inbox.wait(1)
                after = [p.name for p in (await client.list_prompts()).prompts]
            assert inbox.count == 1
        else:
            async with Client(mcp, mode=mode, cache=None) as client, client.listen(prompts_list_changed=True) as sub:
                before = [p.name for p in (await client.list_prompts()).prompts]
                assert not (
                    await client.call_tool("write_doc", {"id": "kernel", "body": "# Kernel\n\nMine.\n"})
                ).is_error
                assert not (await client.call_tool("write_doc", add_line)).is_error
                async for event in sub:
                    assert event == PromptsListChanged()
                    break
                after = [p.name for p in (await client.list_prompts()).prompts]
    assert "lab.count-cells" not in before and after == ["lab.count-cells", *before]


async def test_a_list_taken_right_after_the_change_does_not_hide_it_from_another_session(built: Any) -> None:
    """The writer lists prompts at once (inside the window before the change is checked): the
    other session still hears of the change, and of the next one."""
    mcp, state = built
    (state.store.local_dir / "lab").mkdir(parents=True)
    (state.store.local_dir / "lab" / "count-cells.md").write_text(COUNT_CELLS)
    add_line = {"id": "index", "old": "## Procedures\n", "new": "## Procedures\n- lab/count-cells: count cells\n"}
    other = PromptInbox()
    with anyio.fail_after(WAIT):
        async with (
            Client(mcp, mode="legacy", cache=None) as writer,
            Client(mcp, mode="legacy", cache=None, message_handler=other) as reader,
        ):
            assert "lab.count-cells" not in [p.name for p in (await reader.list_prompts()).prompts]
            assert not (await writer.call_tool("write_doc", add_line)).is_error
            assert "lab.count-cells" in [p.name for p in (await writer.list_prompts()).prompts]
            await other.wait(1)
            assert not (
                await writer.call_tool(
                    "write_doc", {"id": "index", "old": "- lab/count-cells: count cells\n", "new": ""}
                )
            ).is_error
            await other.wait(2)
    assert other.count == 2


async def test_a_hand_edit_of_the_index_seen_by_the_watcher_sends_prompts_list_changed(built: Any) -> None:
    """While a client listens, the watcher looks at the disk: a procedure line added by hand (or by
    another server process) changes the prompts, and that is announced too."""
    mcp, state = built
    (state.store.local_dir / "lab").mkdir(parents=True)
    (state.store.local_dir / "lab" / "count-cells.md").write_text(COUNT_CELLS)
    with anyio.fail_after(WAIT):
        async with Client(mcp, cache=None) as client, client.listen(prompts_list_changed=True) as sub:
            assert "lab.count-cells" not in [p.name for p in (await client.list_prompts()).prompts]
            index = state.store.shelf.index_path
            index.write_text(index.read_text().replace("## Procedures\n", "## Procedures\n- lab/count-cells: count\n"))
            async for event in sub:
                assert event == PromptsListChanged()
                break
            assert "lab.count-cells" in [p.name for p in (await client.list_prompts()).prompts]


@pytest.mark.parametrize("mode", MODES)
async def test_completion_offers_doc_ids_listed_first_at_most_100_with_total(built: Any, mode: str) -> None:
    mcp, state = built
    notes = state.store.local_dir / "notes"
    notes.mkdir(parents=True)
    for n in range(150):
        (notes / f"n{n:03d}.md").write_text(f"# Note {n}\n")
    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            seg = (await client.complete(TEMPLATE, {"name": "id", "value": "seg"})).completion
            every = (await client.complete(TEMPLATE, {"name": "id", "value": ""})).completion
            many = (await client.complete(TEMPLATE, {"name": "id", "value": "notes/n1"})).completion
            with pytest.raises(MCPError) as exc_info:
                await client.complete(
                    ResourceTemplateReference(type="ref/resource", uri="file:///{path}"), {"name": "path", "value": ""}
                )
            assert exc_info.value.error.code == -32602
    assert (
        seg.values == ["segment-nuclei", "segment-cells", "segment-nuclei-3d"] and seg.total == 3 and not seg.has_more
    )
    assert every.values[:3] == ["index", "kernel", "data"]  # the index, then its entries in order
    assert every.values.index("large-image") < every.values.index("notes/n000")  # listed before unlisted
    assert len(every.values) == 100 and every.total == 1 + len(state.store.shelf.doc_ids()) > 150 and every.has_more
    assert many.values == [f"notes/n{n}" for n in range(100, 150)] and many.total == 50 and not many.has_more


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's working directory: files to offer, and links that lead out of it."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "data").mkdir(parents=True)
    outside.mkdir()
    for name in ("cells.tif", "cells-2.tif", ".secret.tif", "data/c1.tif", "data/c2.tif"):
        (work / name).write_text("x")
    (outside / "private.tif").write_text("x")
    (work / "cells-link.tif").symlink_to(outside / "private.tif")
    (work / "linked-dir").symlink_to(outside)
    monkeypatch.chdir(work)
    return work


@pytest.mark.parametrize("mode", MODES)
async def test_a_file_argument_completes_from_the_working_directory_and_never_out_of_it(
    built: Any, workdir: Path, mode: str
) -> None:
    mcp, _ = built
    nuclei = PromptReference(type="ref/prompt", name="segment-nuclei")

    async def values(client: Client, argument: str, value: str) -> list[str]:
        return (await client.complete(nuclei, {"name": argument, "value": value})).completion.values

    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            assert await values(client, "image", "cel") == ["cells-2.tif", "cells.tif"]  # the link is not offered
            assert await values(client, "image", "") == ["cells-2.tif", "cells.tif", "data/"]
            assert await values(client, "image", "data/") == ["data/c1.tif", "data/c2.tif"]
            assert await values(client, "image", ".s") == [".secret.tif"]
            for escape in ("linked-dir/", "../", "/etc/pa", "~/"):
                assert await values(client, "image", escape) == [], escape
            assert await values(client, "nucleus_diameter_px", "") == []  # not a file argument
            with pytest.raises(MCPError) as exc_info:
                await client.complete(
                    PromptReference(type="ref/prompt", name="no-such"), {"name": "image", "value": ""}
                )
            assert exc_info.value.error.code == -32602


async def test_with_a_kernel_running_files_complete_from_the_kernels_working_directory(
    isolated_dirs: Path, workdir: Path
) -> None:
    """The kernel is the agent's: once it moved elsewhere, its folder is what completes."""
    settings = load_settings()
    mcp, state = build_server(replace(settings, kernel=replace(settings.kernel, promote_after=300.0)))
    elsewhere = workdir.parent / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "sub" / "k1.tif").write_text("x")
    nuclei = PromptReference(type="ref/prompt", name="segment-nuclei")
    try:
        with anyio.fail_after(180):
            async with Client(mcp, mode="legacy", cache=None) as client:
                assert (await client.complete(nuclei, {"name": "image", "value": "sub/"})).completion.values == []
                assert not (await client.call_tool("start_kernel", {})).is_error
                moved = await client.call_tool("execute_code", {"code": f"import os; os.chdir({str(elsewhere)!r})"})
                assert not moved.is_error, text_of(moved)
                found = (await client.complete(nuclei, {"name": "image", "value": "sub/"})).completion
    finally:
        state.kernel.shutdown()
    assert found.values == ["sub/k1.tif"] and found.total == 1


@pytest.mark.parametrize("mode", MODES)
async def test_write_doc_section_lab_files_a_new_doc_under_lab_in_one_call(built: Any, mode: str) -> None:
    mcp, state = built
    body = "---\ndescription: report areas in square microns\n---\n# Areas\n\nAlways square microns.\n"
    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            result = await client.call_tool("write_doc", {"id": "lab/areas", "body": body, "section": "Lab"})
            refused = await client.call_tool(
                "write_doc", {"id": "lab/areas", "old": "Always", "new": "Only", "section": "Lab"}
            )
    text = text_of(result)
    assert not result.is_error and "+# Areas" in text and "Index: filed under ## Lab:" in text and "+## Lab" in text
    index = (state.store.local_dir / "index.md").read_text()
    assert "## Lab\n- lab/areas: report areas in square microns\n\nignored:" in index and "## Unfiled" not in index
    assert refused.is_error and "does not apply to an old/new edit" in text_of(refused)
    assert "Always square microns" in read_doc(state.store, "lab/areas")


@pytest.mark.parametrize("mode", MODES)
async def test_search_docs_finds_a_rule_kept_in_the_index(built: Any, mode: str) -> None:
    mcp, _ = built
    rule = "## Lab rules\nPositive cells: GFP mean above 2.5 times the background median.\n"
    with anyio.fail_after(WAIT):
        async with Client(mcp, mode=mode, cache=None) as client:
            assert not (
                await client.call_tool("write_doc", {"id": "index", "old": "ignored:", "new": rule + "\nignored:"})
            ).is_error
            found = text_of(await client.call_tool("search_docs", {"query": "GFP mean above"}))
    assert "1. index — § Lab rules" in found and "2.5 times the background" in found


async def test_over_stdio_prompts_list_get_and_complete(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "BIOPB_CONFIG_DIR": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    (tmp_path / "cells.tif").write_text("x")
    params = StdioServerParameters(command=sys.executable, args=["-m", "biopb_mcp"], env=env, cwd=str(tmp_path))
    with anyio.fail_after(120):
        async with Client(params, cache=None) as client:
            assert client.server_capabilities.prompts is not None
            names = [p.name for p in (await client.list_prompts()).prompts]
            got = await client.get_prompt("flatfield", {"image": "cells.tif"})
            files = await client.complete(
                PromptReference(type="ref/prompt", name="flatfield"), {"name": "image", "value": "ce"}
            )
    assert "flatfield" in names and not REFERENCES & set(names)
    assert isinstance(got.messages[1].content, EmbeddedResource)
    assert files.completion.values == ["cells.tif"]


class _KernelAt:
    """The kernel host's seam for the working directory: a ready kernel that answers a query with
    ``answers`` in turn (None: busy)."""

    state = KernelState.READY

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)

    @property
    def probes(self) -> _KernelAt:
        return self

    def query_when_idle(self, expression: str, timeout: float = 2.0) -> object:
        assert "getcwd" in expression
        return self.answers.pop(0)


def test_a_busy_kernel_keeps_its_last_directory_and_a_kernel_elsewhere_offers_no_files(tmp_path: Path) -> None:
    """A joined kernel on another machine (an HPC node) has its files there, not here."""
    store = DocStore(tmp_path / "docs")
    here = _KernelAt([str(tmp_path), socket.gethostname()], None)
    completions = Completions(store, ProcedurePrompts(store), here)  # type: ignore[arg-type]
    assert completions.workdir() == tmp_path
    assert completions.workdir() == tmp_path  # busy: where it was last
    away = _KernelAt([str(tmp_path), "hpc-node-17"])
    assert Completions(store, ProcedurePrompts(store), away).workdir() is None  # type: ignore[arg-type]
