"""Agent commands: templates fill their placeholders, and an overrunning agent dies with its tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import psutil
import pytest

from bench.agents import make_agent, run_command


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_template_fills_every_placeholder_inside_arguments(tmp_path: Path) -> None:
    agent = make_agent("my-agent --ask {prompt} --cfg={mcp_config} -C {workdir}")
    argv = agent.command(prompt="count {the} nuclei's", workdir=tmp_path, mcp_config=tmp_path / "m.json")
    assert argv == ["my-agent", "--ask", "count {the} nuclei's", f"--cfg={tmp_path / 'm.json'}", "-C", str(tmp_path)]
    claude = make_agent("claude").command(prompt="p", workdir=tmp_path, mcp_config=tmp_path / "m.json")
    assert claude[:3] == ["claude", "-p", "p"] and "--mcp-config" in claude and "--strict-mcp-config" in claude
    with pytest.raises(ValueError, match="empty"):
        make_agent("  ")


def test_agent_that_exits_reports_its_exit_code(tmp_path: Path) -> None:
    run = run_command(
        [sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=60,
        stdout=tmp_path / "out",
        stderr=tmp_path / "err",
    )
    assert (run.exit_code, run.timed_out) == (3, False)
    assert (tmp_path / "out").read_text() == "hi\n"


async def test_overrunning_agent_is_killed_with_its_children(tmp_path: Path) -> None:
    # One child stays in the agent's process group; the other escapes into a session of its own
    # (as a kernel does) and is found by the run's environment marker.
    script = "sleep 300 & echo $! > child.pid; setsid sleep 301 & echo $! > escaped.pid; echo $$ > agent.pid; sleep 302"
    env = {**os.environ, "BIOPB_CONFIG_DIR": str(tmp_path / "marker")}
    run = await anyio.to_thread.run_sync(
        lambda: run_command(
            ["sh", "-c", script],
            cwd=tmp_path,
            env=env,
            timeout=1.5,
            stdout=tmp_path / "o",
            stderr=tmp_path / "e",
            marker=("BIOPB_CONFIG_DIR", env["BIOPB_CONFIG_DIR"]),
        )
    )
    assert run.timed_out and run.exit_code is None
    pids = [int((tmp_path / name).read_text()) for name in ("agent.pid", "child.pid", "escaped.pid")]
    assert set(pids) <= set(run.killed)
    with anyio.fail_after(10):
        while not all(_gone(pid) for pid in pids):
            await anyio.sleep(0.05)


pytestmark = pytest.mark.anyio
