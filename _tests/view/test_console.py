"""The scientist's console: `biopb-mcp console` in a real pseudo-terminal beside a real server."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from _tests.support.pty_console import PtyProgram
from _tests.support.results import text_of
from _tests.support.runner import run_to_end
from _tests.support.screenshots import keep_for_guide
from _tests.support.stdio_procs import make_env, stdio_params
from _tests.support.terminal_picture import inked_rows
from biopb_mcp.cli.commands import main
from biopb_mcp.errors import KernelError

pytestmark = pytest.mark.anyio

PROMPT = r"In \[\d+\]: "


async def run(client: Client, code: str) -> str:
    """execute_code's text, the call followed to its end should a loaded machine make it a job."""
    result = await run_to_end(client, code)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def until_in_namespace(client: Client, console: PtyProgram, name: str, value: str) -> None:
    """Wait until a line typed in the console has run: the agent sees ``name`` with ``value``."""
    deadline = anyio.current_time() + 60
    while value not in await run(client, f"globals().get({name!r})"):
        if anyio.current_time() > deadline:
            raise AssertionError(f"{name} typed in the console never reached the namespace:\n{console.screen}")
        await anyio.sleep(0.2)


async def test_console_shows_the_agents_work_shares_the_namespace_and_quit_keeps_the_kernel(
    tmp_path: Path,
) -> None:
    # Both processes read the runtime dir from the same config file.
    env = make_env(tmp_path, config=f'[server]\nruntime_dir = "{tmp_path / "rt"}"\n')
    console_env = {**os.environ, **env, "TERM": "xterm", "COLUMNS": "200", "LINES": "50"}
    with anyio.fail_after(240):
        async with Client(stdio_params(env), mode="legacy", read_timeout_seconds=90) as client:
            await client.call_tool("start_kernel", {})
            status = json.loads(text_of(await client.call_tool("server_status", {})))
            kernel_pid = status["kernel"]["pid"]
            await run(client, "x = 41")

            console = PtyProgram([sys.executable, "-m", "biopb_mcp", "console"], console_env)
            try:
                seen = await anyio.to_thread.run_sync(console.wait_for, "Attached to the kernel")
                seen = await anyio.to_thread.run_sync(lambda: console.wait_for(PROMPT, after=seen))

                # The agent runs code after the console attached: the console shows it, marked.
                assert "agent printed 42" in await run(client, "y = x + 1\nprint('agent printed', y)")
                seen = await anyio.to_thread.run_sync(
                    lambda: console.wait_for(r"\[agent\] In \[\d+\]: y = x \+ 1", after=seen)
                )
                seen = await anyio.to_thread.run_sync(lambda: console.wait_for("agent printed 42", after=seen))

                # The scientist types into the same namespace; the agent sees it.
                console.type("z = y * 2\r")
                await until_in_namespace(client, console, "z", "84")

                # quit leaves the console, not the kernel.
                console.type("quit\r")
                await anyio.to_thread.run_sync(lambda: console.proc.wait(60))
                assert console.proc.returncode == 0, console.screen
                assert "keeping kernel alive" in console.screen
            finally:
                console.close()

            assert "(41, 42, 84)" in await run(client, "x, y, z")
            status = json.loads(text_of(await client.call_tool("server_status", {})))
            assert status["kernel"]["state"] == "ready"
            assert status["kernel"]["pid"] == kernel_pid


IMAGE = (
    "import numpy as np, imageio.v3 as iio\n"
    "from IPython.display import Image, display\n"
    "display(Image(iio.imwrite('<bytes>', np.zeros((413, 556), np.uint8), extension='.png')))"
)


BAR = (
    "import sys\n"
    "for i in range(51):\n"
    "    sys.stderr.write(f'\\rprogress {i}/50'); sys.stderr.flush()\n"
    "sys.stderr.write('\\n')"
)


async def test_console_keeps_the_prompt_whole_and_in_step_with_the_agents_cells(tmp_path: Path) -> None:
    """Attached after the agent ran two cells, the prompt says In [3]; the agent's result is its own
    line, every line of its code marked; output arriving while the scientist types is printed above the prompt, which comes back
    with what was typed; an image is shown by its size. The guide shows its terminal's picture."""
    env = make_env(tmp_path, config=f'[server]\nruntime_dir = "{tmp_path / "rt"}"\n')
    console_env = {**os.environ, **env, "TERM": "xterm", "COLUMNS": "110", "LINES": "40"}  # a window's size
    with anyio.fail_after(240):
        async with Client(stdio_params(env), mode="legacy", read_timeout_seconds=90) as client:
            await client.call_tool("start_kernel", {})
            await run(client, "a = 1")
            await run(client, "b = 2")
            console = PtyProgram([sys.executable, "-m", "biopb_mcp", "console"], console_env)
            try:
                seen = await anyio.to_thread.run_sync(console.wait_for, "Attached to the kernel")
                seen = await anyio.to_thread.run_sync(lambda: console.wait_for(r"In \[3\]: ", after=seen))
                console.type("typed_here = a + b")  # no Enter: the scientist is mid-line
                seen = await anyio.to_thread.run_sync(lambda: console.wait_for("typed_here = a", after=seen))

                await run(client, "print('agent printed', a + b)\na + b")
                seen = await anyio.to_thread.run_sync(
                    lambda: console.wait_for(r"\[agent\] In \[3\]: print\('agent printed', a \+ b\)", after=seen)
                )
                # its second line is marked as the agent's too, aligned as IPython aligns continuations
                seen = await anyio.to_thread.run_sync(
                    lambda: console.wait_for(r"\n\[agent\]    \.\.\.: a \+ b\n", after=seen)
                )
                seen = await anyio.to_thread.run_sync(lambda: console.wait_for(r"agent printed 3\n", after=seen))
                out_at = await anyio.to_thread.run_sync(
                    lambda: console.wait_for(r"\[agent\] Out\[3\]: 3\n", after=seen)
                )
                out_line = console.screen[:out_at].splitlines()[-1]
                assert "In [" not in out_line, out_line
                # the prompt comes back below the agent's output, numbered after it, with the typed text
                seen = await anyio.to_thread.run_sync(
                    lambda: console.wait_for(r"In \[4\]: typed_here = a \+ b", after=out_at)
                )

                await run(client, IMAGE)
                seen = await anyio.to_thread.run_sync(
                    lambda: console.wait_for(r"\[agent\] \[image 556×413\]\n", after=seen)
                )
                assert "IPython.core.display.Image object" not in console.screen

                # a progress bar of the agent's: only its last state reaches the terminal
                await run(client, BAR)
                seen = await anyio.to_thread.run_sync(lambda: console.wait_for(r"progress 50/50\n", after=seen))
                assert "progress 25/50" not in console.screen and "\rprogress" not in console.screen

                # what a person at this terminal sees: the agent's cell, marked, its output and result, the
                # image and the bar's last state; below them the scientist's line as typed, at the cursor
                seen = await anyio.to_thread.run_sync(
                    lambda: console.wait_for(r"\[agent\] Out\[\d+\]: 1\n", after=seen)
                )
                typed = r"In \[\d+\]: typed_here = a \+ b"
                deadline = anyio.current_time() + 30
                while not re.fullmatch(typed, console.cursor_line) and anyio.current_time() < deadline:
                    await anyio.sleep(0.1)  # the prompt is redrawn below the agent's last output
                shot = tmp_path / "console.png"
                shown, rows = console.picture(shot)
                at = shown.index("[agent] In [3]: print('agent printed', a + b)")
                assert shown[at + 1 : at + 4] == ["[agent]    ...: a + b", "agent printed 3", "[agent] Out[3]: 3"], (
                    shown
                )
                assert "[agent] [image 556×413]" in shown and "progress 50/50" in shown, shown
                assert not [line for line in shown if "progress 2" in line], shown
                assert re.fullmatch(typed, shown[rows - 1]), shown  # the last line, where the cursor is
                # the picture holds that screen: ink on each line with text (and the cursor's), none between
                assert inked_rows(shot, rows) == [bool(line) for line in shown[: rows - 1]] + [True], shown
                keep_for_guide(shot, "console-screenshot.png")  # the guide's kernel page shows it
                console.type("\r")  # the typed line, intact, runs in the shared namespace
                await until_in_namespace(client, console, "typed_here", "3")
                console.type("quit\r")
                await anyio.to_thread.run_sync(lambda: console.proc.wait(60))
            finally:
                console.close()


def test_console_without_a_running_server_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["console"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no running biopb-mcp server") and err.count("\n") == 1
    assert main(["console", "--pid", "1"]) == 2
    assert "no biopb-mcp server with pid 1" in capsys.readouterr().err


def test_a_shared_runtime_dir_is_searched_where_the_server_writes_its_files(tmp_path: Path) -> None:
    """A 1777 runtime dir holds our files in a private subdirectory; the console must look there."""
    from biopb_mcp.cli.console import running_kernels
    from biopb_mcp.fs.runtime import private_runtime_dir

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    private = private_runtime_dir(shared)
    assert private is not None and private != shared
    conn = private / f"kernel-{os.getpid()}-0123abcd.json"
    conn.write_text("{}", encoding="utf-8")
    assert [k.connection_file for k in running_kernels(shared)] == [conn]


def test_console_joins_only_a_server_of_its_own_config_even_in_a_shared_runtime_dir(tmp_path: Path) -> None:
    """Two config trees that share a runtime dir: "the newest server" is the newest of this config,
    and --pid naming the other tree's server says which config it runs with."""
    from _tests.support.isolation import make_settings
    from biopb_mcp.cli.console import find_kernel
    from biopb_mcp.kernel import KernelHost

    shared = tmp_path / "rt"
    mine = make_settings(tmp_path / "a", runtime_dir=shared)
    host = KernelHost(mine)
    try:
        conn = Path(str(host.start().status.connection_file))
        other = conn.with_name(f"kernel-{os.getppid()}-0123abcd.json")  # a live pid, a newer file
        other.write_text(json.dumps({"biopb_config_dir": str(tmp_path / "b" / "config")}), encoding="utf-8")
        os.utime(other, (conn.stat().st_mtime + 60,) * 2)
        assert find_kernel(shared, None, mine.config_dir).connection_file == conn
        assert find_kernel(shared, os.getpid(), mine.config_dir).connection_file == conn
        with pytest.raises(KernelError, match=re.escape(f"config dir {tmp_path / 'b' / 'config'}")):
            find_kernel(shared, os.getppid(), mine.config_dir)
        with pytest.raises(KernelError, match="no running biopb-mcp server with the config dir"):
            find_kernel(shared, None, tmp_path / "c")
    finally:
        host.shutdown()


def test_two_trees_from_the_env_never_see_each_others_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server of tree A in its default runtime dir is invisible to `biopb-mcp console` of tree B."""
    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.kernel import KernelHost

    monkeypatch.setenv("BIOPB_CONFIG_DIR", str(tmp_path / "a"))
    host = KernelHost(load_settings())
    try:
        conn = Path(str(host.start().status.connection_file))
        assert conn.parent == tmp_path / "a" / "run" and conn.parent.stat().st_mode & 0o777 == 0o700
        monkeypatch.setenv("BIOPB_CONFIG_DIR", str(tmp_path / "b"))
        assert main(["console"]) == 2
        assert f"in {tmp_path / 'b' / 'run'}" in capsys.readouterr().err
    finally:
        host.shutdown()
