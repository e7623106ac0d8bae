"""The saved-images folder: bounded across runs and as it grows, swept oldest first, written safely."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import anyio
import pytest
from mcp import Client

from _tests.support.isolation import make_settings
from _tests.support.results import text_of
from _tests.support.runner import run_to_end
from biopb_mcp.kernel import KernelHost, image_files
from biopb_mcp.kernel.image_files import MAX_FILES, ImageFiles
from biopb_mcp.server import build_server

MANY_IMAGES = (
    "import numpy as np, imageio.v3 as iio\n"
    "from IPython.display import Image, display\n"
    "for n in range(12):\n"
    "    display(Image(iio.imwrite('<bytes>', np.full((8, 8), n * 20, np.uint8), extension='.png')))"
)


def fill(folder: Path, count: int) -> list[Path]:
    """``count`` saved images of earlier runs, oldest first."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(count):
        path = folder / f"1234-abcdef-job-{n}-image1.png"
        path.write_bytes(b"\x89PNG old")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
        paths.append(path)
    return paths


def test_a_folder_filled_by_earlier_runs_is_swept_oldest_first_when_a_kernel_starts(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    old = fill(Path(settings.state_dir) / "images", MAX_FILES + 100)
    host = KernelHost(settings)
    try:
        host.start()
    finally:
        host.shutdown()
    left = sorted(p for p in old if p.exists())
    assert left == sorted(old[100:])  # the 100 oldest went, the newest 500 stayed


@pytest.mark.anyio
async def test_images_past_max_images_keep_the_folder_within_its_bound_as_it_grows(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "[kernel]\nmax_images = 1\n")
    folder = Path(settings.state_dir) / "images"
    image_files.for_dir(folder).max_files = 5
    mcp, state = build_server(settings)
    try:
        with anyio.fail_after(120):
            async with Client(mcp, mode="legacy") as client:
                await client.call_tool("start_kernel", {})
                for _ in range(2):  # each to its end: a cold import on a loaded machine can promote the first
                    text = text_of(await run_to_end(client, MANY_IMAGES))
    finally:
        state.kernel.shutdown()
        image_files.for_dir(folder).max_files = MAX_FILES
    saved = re.findall(r"saved to (\S+\.png)", text)
    assert len(saved) == 12  # every image is saved and named (one attached besides)
    files = sorted(folder.iterdir())
    assert len(files) == 5 and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert {str(f) for f in files} <= set(saved)  # the newest are the ones kept


def test_a_link_planted_at_an_images_name_is_replaced_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    folder = tmp_path / "images"
    folder.mkdir()
    (folder / "job-1-image1.png").symlink_to(victim)
    path = ImageFiles(folder).save("job-1-image1.png", b"\x89PNG new")
    assert victim.read_text() == "precious\n"
    assert not path.is_symlink() and path.read_bytes() == b"\x89PNG new"
