"""Server wiring through an in-process MCP client, both protocol eras, real store and real kernel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from _tests.support.results import text_of
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.store import DocStore
from biopb_mcp.server import build_server
from biopb_mcp.server.tools.docs import AUTHORING_GATE
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index
from biopb_mcp.text.instructions import ASK_FIRST_LINE, GUARDRAILS, INDEX_HEADER, READ_FIRST_LINE, START_LINE

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]
READ_ONLY_TOOLS = {"read_doc", "search_docs", "server_status", "inspect_object", "poll_job"}
ALL_TOOLS = READ_ONLY_TOOLS | {
    "start_kernel",
    "execute_code",
    "interrupt_kernel",
    "restart_kernel",
    "write_doc",
}


@pytest.fixture
def built(isolated_dirs: Path, tmp_path: Path) -> Any:
    settings = load_settings()
    # No promotion in these tests: an open call must stay open however slow the machine is.
    settings = replace(settings, kernel=replace(settings.kernel, promote_after=300.0))
    mcp, state = build_server(settings, trace=tmp_path / "trace.jsonl")
    yield mcp, state
    state.kernel.shutdown()


@pytest.mark.parametrize("mode", MODES)
async def test_tools_are_listed_with_when_to_use_and_read_only_annotations(built: Any, mode: str) -> None:
    mcp, _ = built
    with anyio.fail_after(20):
        async with Client(mcp, mode=mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= ALL_TOOLS
    for name in ALL_TOOLS:
        tool = tools[name]
        assert tool.description and len(tool.description) > 60, name
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        assert read_only == (name in READ_ONLY_TOOLS), name
    restart_annotations, write = tools["restart_kernel"].annotations, tools["write_doc"].description
    assert restart_annotations is not None and write is not None and tools["execute_code"].description is not None
    assert restart_annotations.destructive_hint is True
    assert "[[" in write and "index" in write and "old" in write
    assert write.count("\n- ") >= 5  # the five authoring bullets
    # where a standing lab fact goes, and a narrower rule kept beside the old one
    assert "fact doc" in write and "with its scope" in write and "never replacing it silently" in write
    assert "\n        " not in tools["execute_code"].description  # dedented for the agent


@pytest.mark.parametrize("mode", MODES)
async def test_instructions_carry_the_rendered_index_in_order(built: Any, mode: str) -> None:
    mcp, state = built
    with anyio.fail_after(20):
        async with Client(mcp, mode=mode) as client:
            instructions = client.instructions
    assert instructions is not None
    rendered = render_index(state.store).strip()
    assert rendered
    parts = [START_LINE, INDEX_HEADER, rendered, READ_FIRST_LINE, GUARDRAILS, ASK_FIRST_LINE]
    positions = [instructions.index(part) for part in parts]
    assert positions == sorted(positions)


async def test_a_hand_edit_of_the_index_shows_in_the_next_session(built: Any) -> None:
    mcp, state = built
    async with Client(mcp, mode="legacy") as client:
        assert "hand-added-marker" not in (client.instructions or "")
    index = state.settings.docs_local_dir / "index.md"
    index.write_text(index.read_text() + "\n- hand-added-marker: when the user asks for the marker\n")
    for mode in MODES:
        async with Client(mcp, mode=mode) as client:
            assert "hand-added-marker" in (client.instructions or "")


async def test_server_status_says_why_the_local_index_cannot_be_read_with_what_to_do(built: Any) -> None:
    """The store's summary carries the error; the tool words it as read_doc does (text's route)."""
    mcp, state = built
    index = state.settings.docs_local_dir / "index.md"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_bytes(b"# Caf\xe9\n")
    async with Client(mcp, mode="legacy") as client:
        status = json.loads(text_of(await client.call_tool("server_status", {})))
    assert status["docs"]["index_problem"] == f"{index} is not UTF-8 text (byte 0xe9 at offset 5); re-save it as UTF-8."


@pytest.mark.parametrize("mode", MODES)
async def test_kernel_tools_before_start_name_the_state_and_start_kernel(built: Any, mode: str) -> None:
    mcp, _ = built
    async with Client(mcp, mode=mode) as client:
        for name, args in [
            ("execute_code", {"code": "1"}),
            ("inspect_object", {"path": "x"}),
            ("interrupt_kernel", {}),
        ]:
            result = await client.call_tool(name, args)
            assert result.is_error, name
            assert "not_started" in text_of(result) and "start_kernel" in text_of(result), name
            assert result.structured_content is None, name
        status = json.loads(text_of(await client.call_tool("server_status", {})))
    assert status["kernel"]["state"] == "not_started"


@pytest.mark.parametrize("mode", MODES)
async def test_doc_tools_round_trip_with_the_stores_own_errors(built: Any, mode: str, tmp_path: Path) -> None:
    mcp, state = built
    twin = DocStore(state.settings.docs_local_dir)  # a second view of the same tier: same errors
    async with Client(mcp, mode=mode) as client:
        created = await client.call_tool("write_doc", {"id": f"notes/{mode}", "body": "# Notes\n\nfirst line\n"})
        assert not created.is_error, text_of(created)
        assert "first line" in text_of(created)
        edited = await client.call_tool("write_doc", {"id": f"notes/{mode}", "old": "first", "new": "second"})
        assert not edited.is_error and "second" in text_of(edited)
        read = await client.call_tool("read_doc", {"id": f"notes/{mode}"})
        assert "second line" in text_of(read) and "first line" not in text_of(read)
        assert text_of(read) == read_doc(twin, f"notes/{mode}")
        for args in ({"id": "no-such-doc-anywhere"}, {"id": "../escape"}, {"id": "a//b"}):
            with pytest.raises(Exception) as expected:
                read_doc(twin, args["id"])
            result = await client.call_tool("read_doc", args)
            assert result.is_error and str(expected.value) in text_of(result)
        bad_writes = [
            {"id": f"notes/{mode}", "body": "x", "old": "a", "new": "b"},
            {"id": f"notes/{mode}", "old": "not present anywhere", "new": "b"},
            {"id": "../outside", "body": "x"},
        ]
        for args in bad_writes:
            with pytest.raises(Exception) as expected:
                twin.write_doc(args["id"], args.get("body"), args.get("old"), args.get("new"))
            result = await client.call_tool("write_doc", args)
            assert result.is_error and str(expected.value) in text_of(result), args
        assert not (state.settings.docs_local_dir.parent / "outside.md").exists()


async def test_search_docs_finds_a_written_section_and_refuses_an_empty_query(built: Any) -> None:
    mcp, _ = built
    async with Client(mcp, mode="legacy") as client:
        await client.call_tool(
            "write_doc", {"id": "probe", "body": "# Probe\n\n## Zebrafish quirks\n\nxylophone-marker\n"}
        )
        hits = await client.call_tool("search_docs", {"query": "xylophone-marker"})
        assert not hits.is_error and "probe" in text_of(hits)
        empty = await client.call_tool("search_docs", {"query": "   "})
        assert empty.is_error and "Error executing tool search_docs" in text_of(empty)
        assert len(text_of(empty)) > len("Error executing tool search_docs: ")


async def test_search_docs_says_when_its_matches_are_weak(built: Any) -> None:
    """A pasted error no shipped doc covers shares only common words with a few sections: the answer
    says they are weak rather than offering them as "best first"; a topic the docs cover does not."""
    mcp, _ = built
    async with Client(mcp, mode="legacy") as client:
        weak = text_of(
            await client.call_tool(
                "search_docs", {"query": "ValueError: Images of type float must be between -1 and 1"}
            )
        )
        strong = text_of(await client.call_tool("search_docs", {"query": "segment nuclei"}))
    assert weak.startswith("No strong matches for 'ValueError: Images of type float"), weak
    assert "weak" in weak and "best first" not in weak
    assert strong.startswith("5 matches for 'segment nuclei', best first"), strong
    assert "weak" not in strong.lower()


async def test_search_keeps_its_index_in_the_state_dir(built: Any) -> None:
    mcp, state = built
    async with Client(mcp, mode="legacy") as client:
        await client.call_tool("write_doc", {"id": "probe", "body": "# Probe\n\n## Quirks\n\nquokkaword\n"})
        hits = await client.call_tool("search_docs", {"query": "quokkaword"})
        assert not hits.is_error and "probe" in text_of(hits)
    assert state.settings.search_db.parent == state.settings.state_dir
    assert state.settings.search_db.is_file()


async def test_without_fts5_search_names_the_cause_and_the_other_tools_work(
    built: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from biopb_mcp.docs.search import fts

    def no_fts5() -> None:  # what a Python built against an SQLite without FTS5 raises
        raise sqlite3.OperationalError("no such module: fts5")

    monkeypatch.setattr(fts, "fts5_probe", no_fts5)
    mcp, state = built
    state.store.search_db = state.settings.state_dir / "no-fts5.sqlite3"  # an index this process has not opened
    async with Client(mcp, mode="legacy") as client:
        result = await client.call_tool("search_docs", {"query": "nuclei"})
        assert result.is_error and "FTS5" in text_of(result) and "Traceback" not in text_of(result)
        write = await client.call_tool("write_doc", {"id": "probe", "body": "# Probe\n\nstill writable\n"})
        assert not write.is_error
        read = await client.call_tool("read_doc", {"id": "probe"})
        assert not read.is_error and "still writable" in text_of(read)


@pytest.mark.parametrize("mode", MODES)
async def test_trace_has_one_line_per_call_without_code_or_bodies(built: Any, tmp_path: Path, mode: str) -> None:
    mcp, _ = built
    async with Client(mcp, mode=mode) as client:
        await client.call_tool("write_doc", {"id": "traced", "body": "# T\n\nsecret-body-text\n"})
        read = await client.call_tool("read_doc", {"id": "traced"})
        await client.call_tool("read_doc", {"id": "missing-one"})
        await client.call_tool("execute_code", {"code": "secret_code_text = 1"})
    records = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [r["tool"] for r in records] == ["write_doc", "read_doc", "read_doc", "execute_code"]
    assert [r["ok"] for r in records] == [True, True, False, False]
    assert records[0]["args"] == {"id": "traced", "body_chars": len("# T\n\nsecret-body-text\n")}
    assert records[3]["args"] == {"code_chars": len("secret_code_text = 1")}
    raw = (tmp_path / "trace.jsonl").read_text()
    assert "secret-body-text" not in raw and "secret_code_text" not in raw
    assert all(r["duration_ms"] >= 0 for r in records)
    # what each answer cost the agent's context: its length, never its text
    text = "".join(part.text for part in read.content if hasattr(part, "text"))
    assert records[1]["answer_chars"] >= len(text) > 0
    assert all(r["answer_chars"] > 0 for r in records)


# ----------------------------------------------------------------------------- with a kernel


@pytest.mark.parametrize("mode", MODES)
async def test_loop_stays_free_while_code_runs(built: Any, mode: str, tmp_path: Path) -> None:
    """read_doc, server_status and interrupt_kernel answer while execute_code is blocked in the kernel.

    The code waits for a file only the test creates, so nothing but the test can end it: in legacy
    mode the file is made once a progress notification arrived; in the modern era interrupt_kernel
    ends it (and the open call returns the KeyboardInterrupt).
    """
    mcp, _ = built
    flag = tmp_path / f"flag-{mode}"
    started = tmp_path / f"started-{mode}"
    # The code marks its own start: an interrupt sent before the code runs is (rightly) reported as
    # "none of it ran", so the test interrupts only once the loop is really running.
    code = (
        f"import os, time\nopen({str(started)!r}, 'w').close()\n"
        f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.05)\nprint('released')"
    )
    seen: list[float] = []
    first_progress = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        first_progress.set()

    results: dict[str, CallToolResult] = {}
    with anyio.fail_after(90):
        async with Client(mcp, mode=mode) as client:
            assert not (await client.call_tool("start_kernel", {})).is_error
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    results["exec"] = await client.call_tool(
                        "execute_code", {"code": code}, progress_callback=on_progress
                    )

                tg.start_soon(run)
                await _wait_busy(client)
                read = await client.call_tool("read_doc", {"id": "index"})
                assert not read.is_error
                status = json.loads(text_of(await client.call_tool("server_status", {})))
                assert status["kernel"]["state"] == "ready"
                assert "exec" not in results  # still blocked in the kernel: nothing queued behind it
                if mode == "legacy":
                    await first_progress.wait()  # progress arrives while the call is open
                    flag.write_text("")
                else:
                    while not started.exists():
                        await anyio.sleep(0.05)
                    stopped = await client.call_tool("interrupt_kernel", {})
                    assert not stopped.is_error, text_of(stopped)
            if mode == "legacy":
                assert "released" in text_of(results["exec"])
                assert seen and seen == sorted(seen)
            else:
                assert "KeyboardInterrupt" in text_of(results["exec"])


async def _wait_busy(client: Client) -> None:
    """Until server_status shows a current job (the execution has reached the kernel)."""
    while True:
        status = json.loads(text_of(await client.call_tool("server_status", {})))
        if status["kernel"].get("job") or status["kernel"].get("current_job"):
            return
        await anyio.sleep(0.05)


async def test_start_kernel_takes_a_fixed_kernel_name_without_a_server_restart(isolated_dirs: Path) -> None:
    """The user fixes kernel.name in the file; the next start_kernel must use the fixed value."""
    isolated_dirs.mkdir()
    config = isolated_dirs / "config.toml"
    config.write_text('[kernel]\nname = "nosuchkernel"\n', encoding="utf-8")
    mcp, state = build_server(load_settings())
    try:
        with anyio.fail_after(90):
            async with Client(mcp, mode="legacy") as client:
                failed = await client.call_tool("start_kernel", {})
                assert failed.is_error and "'nosuchkernel'" in text_of(failed)
                config.write_text('[kernel]\nname = ""\n', encoding="utf-8")
                started = await client.call_tool("start_kernel", {})
                assert not started.is_error, text_of(started)
                status = json.loads(text_of(await client.call_tool("server_status", {})))
        assert status["kernel"]["state"] == "ready"
    finally:
        state.kernel.shutdown()


async def test_restart_with_a_kernel_name_that_does_not_exist_leaves_the_running_kernel_alone(
    isolated_dirs: Path,
) -> None:
    """The spec is checked before the working kernel is stopped: refused, saying why, namespace kept."""
    isolated_dirs.mkdir()
    config = isolated_dirs / "config.toml"
    mcp, state = build_server(load_settings())
    try:
        with anyio.fail_after(90):
            async with Client(mcp, mode="legacy") as client:
                assert not (await client.call_tool("start_kernel", {})).is_error
                pid = json.loads(text_of(await client.call_tool("server_status", {})))["kernel"]["pid"]
                await client.call_tool("execute_code", {"code": "kept = 41"})
                config.write_text('[kernel]\nname = "nosuchkernel"\n', encoding="utf-8")
                refused = await client.call_tool("restart_kernel", {})
                text = text_of(refused)
                assert refused.is_error, text
                assert "'nosuchkernel'" in text and "not touched" in text and "kernel.name" in text, text
                assert "Traceback" not in text
                after = await client.call_tool("execute_code", {"code": "kept + 1"})
                assert "42" in text_of(after), text_of(after)
                status = json.loads(text_of(await client.call_tool("server_status", {})))
        assert status["kernel"]["state"] == "ready" and status["kernel"]["pid"] == pid
    finally:
        state.kernel.shutdown()


async def test_a_relative_trace_path_lands_under_the_config_dir_and_status_shows_it_absolute(
    isolated_dirs: Path,
) -> None:
    """Clients launch the server from a working dir nobody chose: the config dir anchors it."""
    mcp, _ = build_server(load_settings(), trace=Path("calls.jsonl"))
    async with Client(mcp, mode="legacy") as client:
        status = json.loads(text_of(await client.call_tool("server_status", {})))
    assert status["paths"]["trace_file"] == str(isolated_dirs / "calls.jsonl")
    assert (isolated_dirs / "calls.jsonl").read_text(encoding="utf-8").count("\n") == 1


def test_authoring_gate_has_the_five_bullets() -> None:
    bullets = [" ".join(b.split()) for b in ("\n" + AUTHORING_GATE).split("\n- ")[1:]]
    assert len(bullets) == 5
    assert "validated" in bullets[0] and "dataset-specific" in bullets[0]
    assert "user's request" in bullets[1]
    assert "old/new" in bullets[2]
    assert "still exists" in bullets[3]
    assert "[[id]]" in bullets[4]
