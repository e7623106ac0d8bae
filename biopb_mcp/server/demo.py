"""``biopb-mcp demo``: the real server doing its main job end to end, as an agent would drive it.

The server runs as a subprocess over stdio, spoken to by the SDK's own client, inside a temporary
config tree (config, local docs, state, runtime, IPython dir) so the user's own config and docs
are never read or touched. Each step is named in the transcript; the first one that fails ends
the demo with exit code 1 and says what failed. Server, kernel and temp tree are always removed.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

import anyio

from biopb_mcp.config.isolated import IsolatedDirs
from biopb_mcp.fs.runtime import pid_alive
from biopb_mcp.kernel.lifeline import without_banners
from biopb_mcp.text.kernel import split_job_line

__all__ = ["run_demo"]

IMAGE_NAME = "nuclei.png"
"""The returned image's name in the temp tree, where it goes unless the user names a file to keep."""

SHARE_CLAUSE = re.compile(r" \(share it: [^)]*\)")
"""start_kernel's console command: it names this run's server, gone (with the runtime dir the
command looks in) when the demo ends, so the transcript leaves it out."""

NOTE_ID = "demo-note"

SERVER_ARGS = ["-m", "biopb_mcp"]
"""The server, run by this Python: the same install the demo checks."""

INDEX_PROBE = "- segment-nuclei:"
"""A line of the shipped index: its presence shows the index was inlined in the handshake."""

ANALYSIS_CODE = r"""
import random, struct, zlib
from IPython.display import Image, display

# A synthetic nuclei image: bright discs on a dim, noisy background, one per grid cell.
rng = random.Random(7)
size, placed = 96, []
for gy in range(4):
    for gx in range(4):
        if rng.random() < 0.8:
            placed.append((12 + 24 * gy + rng.randint(-3, 3), 12 + 24 * gx + rng.randint(-3, 3)))
try:
    import numpy as np
    from skimage import filters, measure, segmentation

    yy, xx = np.mgrid[:size, :size]
    img = np.random.default_rng(7).normal(20, 4, (size, size))
    for cy, cx in placed:
        img[(yy - cy) ** 2 + (xx - cx) ** 2 <= 36] += 100
    labels = measure.label(img > filters.threshold_otsu(img))
    kept = [r.label for r in measure.regionprops(labels) if r.area >= 20]  # a noise speck is a few pixels, a nucleus ~110
    found = len(kept)
    how = "skimage"
    grey = np.clip((img - img.min()) / np.ptp(img) * 255, 0, 255).astype("uint8").tolist()
    edge = segmentation.find_boundaries(np.isin(labels, kept), mode="inner").tolist()
except ImportError:  # no imaging extra: the same analysis in plain Python
    noise = random.Random(7)
    mask = [[any((y - cy) ** 2 + (x - cx) ** 2 <= 36 for cy, cx in placed) for x in range(size)]
            for y in range(size)]
    grey = [[min(255, max(0, int(noise.gauss(40, 8) + 180 * v))) for v in row] for row in mask]
    edge = [[mask[y][x] and not all(0 <= y + dy < size and 0 <= x + dx < size and mask[y + dy][x + dx]
                                    for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)))
             for x in range(size)] for y in range(size)]
    seen, found = set(), 0
    for y in range(size):
        for x in range(size):
            if mask[y][x] and (y, x) not in seen:
                found += 1
                stack = [(y, x)]
                while stack:
                    py, px = stack.pop()
                    if (py, px) in seen or not (0 <= py < size and 0 <= px < size) or not mask[py][px]:
                        continue
                    seen.add((py, px))
                    stack += [(py + 1, px), (py - 1, px), (py, px + 1), (py, px - 1)]
    how = "python"

def png(rows):  # rows of (r, g, b), each row scaled up 3x so the outlines are easy to see
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px * 3) for row in rows for _ in range(3))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    head = struct.pack(">IIBBBBB", 3 * len(rows[0]), 3 * len(rows), 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")

display(Image(data=png([[(255, 40, 40) if e else (g, g, g) for g, e in zip(gs, es)] for gs, es in zip(grey, edge)])))
print(f"placed {len(placed)} nuclei, found {found} ({how})")
"""
"""Run in the kernel: make an image, count its nuclei, display the image with the found nuclei
outlined; it prints one line, placed and found and the method's key, that the demo reads."""

RESULT_LINE = re.compile(r"^placed (\d+) nuclei, found (\d+) \((\w+)\)$", re.MULTILINE)
"""The line the analysis prints."""

METHODS = {
    "skimage": "numpy + scikit-image (Otsu threshold, connected components, area >= 20 px)",
    "python": "plain Python (install the imaging extra for numpy + scikit-image)",
}

NOTE_BODY = "# Demo note\n\nWritten by `biopb-mcp demo` to show a local doc being created copy-on-write.\n"


class StepFailed(Exception):
    """A demo step did not do what it should; the message says what happened."""


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content if getattr(block, "type", "") == "text")


def _check(result: Any, tool: str) -> str:
    text = _text(result)
    if result.is_error:
        raise StepFailed(f"{tool} answered with an error: {text.strip()[:500]}")
    return text


def _demo_env(root: Path) -> dict[str, str]:
    """The child's environment: every place the server or kernel writes lies under ``root``."""
    env = IsolatedDirs.side_by_side(root, tools=True).environ()
    env.pop("BIOPB_DEBUG", None)
    return env


def _write_config(root: Path) -> None:
    """The tree's config and its private runtime dir."""
    dirs = IsolatedDirs.side_by_side(root, tools=True)
    dirs.write_config(log_level="WARNING")
    dirs.runtime_dir.mkdir(mode=0o700)


class _Transcript:
    def __init__(self, out: TextIO, total: int) -> None:
        self.out, self.total, self.n = out, total, 0
        self.t0 = time.monotonic()

    def step(self, name: str) -> None:
        self.n += 1
        self.out.write(f"\n[{self.n}/{self.total}] {name}  (t={time.monotonic() - self.t0:.1f} s)\n")
        self.out.flush()

    def show(self, text: str, lines: int = 8) -> None:
        shown = text.rstrip("\n").splitlines()
        for line in shown[:lines]:
            self.out.write(f"    {line}\n")
        if len(shown) > lines:
            self.out.write(f"    … ({len(shown) - lines} more lines)\n")
        self.out.flush()


async def _walk(client: Any, t: _Transcript, image_path: Path, state: dict[str, Any]) -> None:
    async def step(name: str, body: Callable[[], Awaitable[None]]) -> None:
        state["step"] = name
        t.step(name)
        await body()

    async def handshake() -> None:
        instructions = client.instructions or ""
        if "read_doc" not in instructions or INDEX_PROBE not in instructions:
            raise StepFailed(f"the handshake instructions carry no doc index (no line {INDEX_PROBE!r})")
        index_at = instructions.index(INDEX_PROBE)
        t.show("the instructions inline the doc index; a few of its lines:")
        t.show(instructions[index_at:], lines=4)

    async def start_kernel() -> None:
        text = SHARE_CLAUSE.sub("", _check(await client.call_tool("start_kernel", {}), "start_kernel"))
        t.show(text, lines=3)
        t.show("(with your own server running, `biopb-mcp console` attaches a terminal to its kernel)")
        # known from here on, so clean-up can wait for the kernel to go even if a later step fails
        report = json.loads(_check(await client.call_tool("server_status", {}), "server_status"))
        state["kernel_pid"] = report.get("kernel", {}).get("pid")

    async def execute() -> None:
        result = await client.call_tool("execute_code", {"code": ANALYSIS_CODE})
        text, job = split_job_line(_check(result, "execute_code"))
        # A slow machine (a cold import) can take past promote_after: follow the job, as a host does
        while job is not None and job.running:
            await anyio.sleep(0.2)
            result = await client.call_tool("poll_job", {"job_id": job.job_id})
            text, job = split_job_line(_check(result, "poll_job"))
        match = RESULT_LINE.search(text)
        if match is None:
            raise StepFailed(f"execute_code printed no result line: {text.strip()[:300]}")
        placed, found, how = int(match[1]), int(match[2]), match[3]
        t.show(f"placed {placed} nuclei, found {found} with {METHODS.get(how, how)}")
        if placed != found:
            raise StepFailed(f"the analysis counted {found} nuclei where {placed} were placed")
        images = [block for block in result.content if getattr(block, "type", "") == "image"]
        if not images:
            raise StepFailed("execute_code returned no image for the displayed PNG")
        state["image"] = base64.b64decode(images[0].data)

    async def save_image() -> None:
        data = state["image"]
        if not data.startswith(b"\x89PNG"):
            raise StepFailed("the returned image is not a PNG")
        image_path.write_bytes(data)
        t.show(f"{len(data):,} bytes of PNG (the image, found nuclei outlined in red), saved to {image_path}")
        if not state.get("image_kept", True):
            t.show("(removed with the temporary tree; `biopb-mcp demo --image FILE` keeps it)")

    async def read_doc() -> None:
        text = _check(await client.call_tool("read_doc", {"id": "segment-nuclei"}), "read_doc")
        t.show(text, lines=5)

    async def write_doc() -> None:
        text = _check(await client.call_tool("write_doc", {"id": NOTE_ID, "body": NOTE_BODY}), "write_doc")
        if "+# Demo note" not in text:
            raise StepFailed(f"write_doc returned no diff of the new doc: {text.strip()[:300]}")
        t.show("write_doc returns the diff it made (the doc, and its line filed in the index):")
        t.show(text, lines=12)

    async def search() -> None:
        text = _check(await client.call_tool("search_docs", {"query": "nuclei", "max_results": 3}), "search_docs")
        t.show(text, lines=4)

    async def status() -> None:
        report = json.loads(_check(await client.call_tool("server_status", {}), "server_status"))
        kernel = report.get("kernel", {})
        if kernel.get("state") != "ready" or not kernel.get("pid"):
            raise StepFailed(f"server_status shows no ready kernel: {kernel}")
        t.show(f"kernel pid {kernel['pid']}, state {kernel['state']}")
        t.show(f"connection file {kernel.get('connection_file')}")
        t.show(f"local docs {report.get('paths', {}).get('docs_local_dir')}")

    await step("handshake: the doc index arrives in the instructions", handshake)
    await step("start_kernel", start_kernel)
    await step("execute_code: count nuclei in a generated image", execute)
    await step("image: the displayed PNG comes back to the client", save_image)
    await step("read_doc: a shipped procedure", read_doc)
    await step("write_doc: a local note, copy-on-write", write_doc)
    await step("search_docs", search)
    await step("server_status", status)


STEPS = 9
"""The eight steps of ``_walk`` plus clean-up."""


async def _run(out: TextIO, root: Path, image_path: Path, state: dict[str, Any], errlog: TextIO) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=SERVER_ARGS, env=_demo_env(root))
    t = _Transcript(out, STEPS)
    state["step"] = "connect: start the server and open an MCP session"
    try:
        with anyio.fail_after(180):
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=90) as client:
                await _walk(client, t, image_path, state)
                state["step"] = "clean up: stop the server and its kernel"
                t.step(state["step"])
    finally:  # closing the session stopped the server; its kernel goes with it
        pid = state.get("kernel_pid")
        deadline = time.monotonic() + 20
        while pid and pid_alive(pid) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
    if pid and pid_alive(pid):
        raise StepFailed(f"the kernel (pid {pid}) was still running after the server stopped")
    t.show("server and kernel stopped")


def run_demo(out: TextIO = sys.stdout, image_path: Path | None = None) -> int:
    """Run the demo, printing its transcript to ``out``; returns the exit code (0 ok, 1 a step
    failed). The returned image is saved to ``image_path`` and kept, or with None into the temp
    tree, which goes at the end: a demo leaves nothing behind unless asked."""
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="biopb-demo-"))
    state: dict[str, Any] = {"step": "set up a temporary config tree", "image_kept": image_path is not None}
    image_path = image_path or root / IMAGE_NAME
    out.write(
        f"biopb-mcp demo: the real server over stdio, in a temporary config tree {root}\n"
        "(your own config and docs are not used; the tree is removed at the end)\n"
    )
    failure = ""
    try:
        _write_config(root)
        with open(root / "server.stderr", "w", encoding="utf-8") as errlog:  # the server's log lines
            anyio.run(_run, out, root, image_path, state, errlog)
    except StepFailed as exc:
        failure = str(exc)
    except BaseExceptionGroup as group:  # a step failed inside the client's task group
        inner = group.exceptions[0]
        while isinstance(inner, BaseExceptionGroup):
            inner = inner.exceptions[0]
        failure = str(inner) if isinstance(inner, StepFailed) else f"{type(inner).__name__}: {inner}"
    except Exception as exc:  # the demo's top level: any failure is reported as the step's
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        log = _server_log(root) if failure else ""
        shutil.rmtree(root, ignore_errors=True)
    if failure:
        detail = "".join(f"    {line}\n" for line in failure.splitlines())
        out.write(f"\nFAILED at step: {state['step']}\n{detail}")
        if log:
            out.write("    last server and kernel log lines:\n")
            out.write("".join(f"      {line}\n" for line in log.splitlines()[-12:]))
        out.flush()
        return 1
    tidy = "removed" if not root.exists() else "could not be removed"
    out.write(
        f"    temporary tree {root} {tidy}\n\nok: every step passed in "
        f"{time.monotonic() - started:.1f} s."
        + (f" The image is kept at {image_path}." if state["image_kept"] else "")
        + "\n"
    )
    out.flush()
    return 0


def _server_log(root: Path) -> str:
    """What the server and kernel wrote, for a failure report (read before the tree goes)."""
    parts = []
    for path in (root / "server.stderr", root / "state" / "kernel.log"):
        try:
            parts.append(without_banners(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return "\n".join(p for p in parts if p.strip())
