"""``biopb-mcp demo``: the real console command end to end, and a failing step's report and clean-up."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from _tests.support.isolation import isolated_vars
from biopb_mcp.server import demo

STEP_NAMES = [
    "handshake",
    "start_kernel",
    "execute_code",
    "image",
    "read_doc",
    "write_doc",
    "search_docs",
    "server_status",
    "clean up",
]


def _snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
    }


def _processes_under(root: str) -> list[psutil.Process]:
    """Live processes whose command line names a path in ``root`` (server, kernel, reaper)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(root in a for a in proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _no_process_left(root: str) -> list[psutil.Process]:
    deadline = time.monotonic() + 20
    while (left := _processes_under(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_demo_runs_every_step_cleans_up_and_leaves_the_users_config_alone(tmp_path: Path) -> None:
    """Nothing outlives the run outside the temp tree (its image included: it goes with the tree
    unless ``--image`` names a place); the transcript reads as sentences, and names no console
    command for a kernel and runtime dir that are gone when it ends."""
    user_config = tmp_path / "user-config"
    (user_config / "docs").mkdir(parents=True)
    (user_config / "config.toml").write_text('[kernel]\nname = "the-users-own-kernel"\n', encoding="utf-8")
    (user_config / "docs" / "index.md").write_text("# my lab\n\n- mine: my own doc\n", encoding="utf-8")
    before = _snapshot(user_config)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, **isolated_vars(tmp_path), "BIOPB_CONFIG_DIR": str(user_config), "TMPDIR": str(temp)}
    proc = subprocess.run(
        [sys.executable, "-m", "biopb_mcp", "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for n, name in enumerate(STEP_NAMES, 1):
        assert re.search(rf"^\[{n}/{len(STEP_NAMES)}\] {re.escape(name)}", out, re.MULTILINE), (name, out)
    assert "placed 15 nuclei, found 15" in out and "ok: every step passed" in out
    assert "(15, 15," not in out, "a raw tuple in the transcript"
    assert "console --pid" not in out, out
    root = re.search(r"temporary config tree (\S+)", out)
    assert root is not None and not Path(root.group(1)).exists()
    assert Path(root.group(1)).parent == temp
    assert list(temp.iterdir()) == [], "the demo left files outside its temp tree"
    assert "--image" in out, "the transcript says how to keep the image"
    assert _no_process_left(root.group(1)) == []
    assert _snapshot(user_config) == before
    assert not (tmp_path / "state").exists() and not (tmp_path / "runtime").exists()


def test_a_failing_step_is_named_exits_1_and_still_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that dies at once (a broken install) fails the first step, cheaply."""
    monkeypatch.setattr(
        demo, "SERVER_ARGS", ["-c", "import sys; print('broken install', file=sys.stderr); sys.exit(3)"]
    )
    out = io.StringIO()
    code = demo.run_demo(out, tmp_path / "nuclei.png")
    text = out.getvalue()
    assert code == 1
    assert "FAILED at step: connect" in text and "broken install" in text, text
    assert "[1/9]" not in text, "nothing runs after the failed step"
    root = re.search(r"temporary config tree (\S+)", text)
    assert root is not None and not Path(root.group(1)).exists()
    assert _no_process_left(root.group(1)) == []
    assert not (tmp_path / "nuclei.png").exists()


SLOW_ANALYSIS = (
    "get_ipython().events.register('pre_run_cell', lambda info: 'synthetic nuclei' in info.raw_cell "
    "and __import__('time').sleep(1.0))\n"
)
"""A kernel plugin that keeps the demo's analysis cell past a short promote_after, as a cold import
on a slow machine keeps it past the default."""


@pytest.mark.anyio
async def test_the_demo_follows_an_analysis_that_outlives_promote_after(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from _tests.support.isolation import make_settings
    from biopb_mcp.server import build_server

    (tmp_path / "config" / "kernel").mkdir(parents=True)
    (tmp_path / "config" / "kernel" / "slow.py").write_text(SLOW_ANALYSIS, encoding="utf-8")
    mcp, state = build_server(make_settings(tmp_path, "[kernel]\npromote_after = 0.2\n"))
    out = io.StringIO()
    try:
        with anyio.fail_after(180):
            async with Client(mcp, mode="legacy") as client:
                await demo._walk(client, demo._Transcript(out, demo.STEPS), tmp_path / "nuclei.png", {})
    finally:
        state.kernel.shutdown()
    assert "placed 15 nuclei, found 15" in out.getvalue(), out.getvalue()
    _assert_image_with_outlines(tmp_path / "nuclei.png")


def _assert_image_with_outlines(path: Path) -> None:
    """The returned image is the analysed image in grey with the found nuclei outlined in colour,
    big enough to see, rather than a small black-and-white mask."""
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG" and image.mode == "RGB", (image.format, image.mode)
        assert min(image.size) >= 192, image.size
        rgb = image.tobytes()
    pixels = [tuple(rgb[i : i + 3]) for i in range(0, len(rgb), 3)]
    grey = {p for p in pixels if p[0] == p[1] == p[2]}
    outline = [p for p in pixels if p[0] > 200 and p[1] < 80 and p[2] < 80]
    assert len(grey) > 20, "the image itself, in many grey levels"
    assert len(outline) > 15 * 40, "every nucleus outlined"
