"""The large-image procedure, run in a real kernel on a local dask cluster with little memory.

Two workers get a memory limit that leaves them less room for data than the image's labels
take (int32, 4 bytes a pixel) and than its smoothed copy (float32): the procedure must stream
chunk by chunk, count every object once across chunk borders, keep its workers alive, and agree
on a crop with the same steps done in memory. The full-size run (an image larger than the
workers' total limit) is ``python -m bench ooc``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile

from _tests.support import seedlib
from _tests.support.disc_grid import (
    DIAMETER,
    DISC_AREA,
    disc_mask,
    expected_objects,
    in_memory,
    same_partition,
    synthetic_patch,
    synthetic_region,
    write_synthetic_tiff,
)
from _tests.support.isolation import make_settings
from biopb_mcp.config.settings import load_settings
from biopb_mcp.kernel import KernelHost
from biopb_mcp.text.kernel import rendered_text

SIDE = 3584
WORKER_LIMIT = 170e6
"""Each worker holds about 100 MB of libraries, so two of them have about 2 x 20 MB for data before
they spill to disk (at 70 % of the limit): less than the labels (51 MB) or the smoothed image. (At
150 MB a worker pauses, at 80 % of its limit, as soon as reading a zarr imports its libraries.)"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHost]:
    settings = make_settings(tmp_path_factory.mktemp("large"), kernel="request_timeout = 30.0\n")
    cfile = settings.config_file
    cfile.write_text(
        cfile.read_text(encoding="utf-8") + '[compute]\nscheduler = "local"\nworkers = 2\n'
        f'threads_per_worker = 1\nmemory_limit = "{WORKER_LIMIT / 1e6:.0f}MB"\n'
        "connect_timeout = 60.0\n",
        encoding="utf-8",
    )
    h = KernelHost(load_settings(settings.config_dir))
    h.start()
    try:
        yield h
    finally:
        h.shutdown()


def run(host: KernelHost, code: str) -> tuple[str, str]:
    ex = host.jobs.submit(code)
    assert host.jobs.wait(ex, 300), f"still running: {code[:200]}"
    return ex.status, rendered_text(host.jobs.render(ex))


def ok(host: KernelHost, code: str) -> str:
    status, text = run(host, code)
    assert status == "ok", f"{code[:2000]}\n---\n{text}"
    return text


def value(host: KernelHost, expression: str) -> Any:
    return json.loads(ok(host, f"print(__import__('json').dumps({expression}))").strip().splitlines()[-1])


def set_inputs(host: KernelHost, source: Path, out: Path) -> None:
    ok(host, f"source_path = {str(source)!r}\nobject_diameter_px = {DIAMETER}\nout_path = {str(out)!r}")


WORKERS = (
    "sorted((a, pid, dask_client().scheduler_info()['workers'][a]['memory_limit']) "
    "for a, pid in dask_client().run(__import__('os').getpid).items())"
)


@pytest.mark.timeout(900)  # a loaded 2-core machine; the CPU it takes is a fraction of that
def test_large_image_streams_on_small_workers_without_seams_and_equal_to_in_memory(
    host: KernelHost, tmp_path: Path
) -> None:
    patch = synthetic_patch()
    source = tmp_path / "big.tif"
    write_synthetic_tiff(source, SIDE, patch, tile=512)
    set_inputs(host, source, tmp_path / "labels.zarr")
    workers_before = value(host, WORKERS)
    assert [w[2] for w in workers_before] == [WORKER_LIMIT] * 2
    for block in seedlib.code_blocks(seedlib.read("large-image")):
        ok(host, block)

    got = value(
        host,
        "{'n': int(n_objects), 'chunk': int(chunk_px), 'labels_bytes': int(labels.nbytes), "
        "'median': float(np.median(areas)), 'threshold': float(threshold), 'sigma': float(sigma)}",
    )
    # the workers' room for data: what they may hold before they spill, above their own memory
    held = value(host, "list(dask_client().run(lambda: __import__('psutil').Process().memory_info().rss).values())")
    assert got["labels_bytes"] > sum(0.7 * WORKER_LIMIT - rss for rss in held), held
    assert got["chunk"] < SIDE // 2  # many chunks, so many seams
    assert got["n"] == expected_objects((SIDE, SIDE))  # every disc once, seams absent
    print(f"workers' memory after the run: {held} bytes")
    assert value(host, WORKERS) == workers_before  # no worker was killed on the way

    # equal on a crop (around a corner where four chunks meet) to the in-memory method
    y0 = x0 = 2 * got["chunk"] - 300
    size = 600
    crop_file = tmp_path / "crop.npy"
    # read in the kernel: a dask read would import dask.array into workers this small, which pauses them
    ok(host, f"np.save({str(crop_file)!r}, zarr.open_array(str(out_path))[{y0}:{y0 + size}, {x0}:{x0 + size}])")
    region = synthetic_region(patch, slice(y0, y0 + size), slice(x0, x0 + size))
    reference = in_memory(region, got["sigma"], got["threshold"])
    margin = int(np.ceil(4 * got["sigma"])) + 1
    inner = np.s_[margin:-margin, margin:-margin]
    chunk_labels = np.load(crop_file)
    np.testing.assert_array_equal(chunk_labels[inner] > 0, reference[inner] > 0)
    assert same_partition(chunk_labels[inner], reference[inner])
    assert abs(got["median"] - DISC_AREA) <= 0.1 * DISC_AREA  # objects keep the drawn size


SWEEP = [  # (side, disc spacing, disc contrast over noise of sigma 3): chunks of 512 px
    (1024, 32, 100.0),  # dense: discs 20 px apart
    (1536, 128, 15.0),  # sparse (0.7 % of pixels) and faint (5 noise sigmas)
    (2048, 64, 30.0),
]


@pytest.mark.timeout(900)
def test_areas_intensities_and_counts_match_the_drawn_objects_across_sizes_densities_contrasts(
    host: KernelHost, tmp_path: Path
) -> None:
    blocks = seedlib.code_blocks(seedlib.read("large-image"))
    for n, (side, spacing, contrast) in enumerate(SWEEP):
        patch = synthetic_patch(seed=n, spacing=spacing, contrast=contrast, side=1024)
        source = tmp_path / f"sweep{n}.tif"
        write_synthetic_tiff(source, side, patch, tile=512)
        set_inputs(host, source, tmp_path / f"sweep{n}.zarr")
        for block in blocks:
            ok(host, block)
        got = value(
            host,
            "{'n': int(n_objects), 'chunk': int(chunk_px), 'total': int(areas.sum()), "
            "'median': float(np.median(areas)), 'intensity': float(np.median(intensities))}",
        )
        drawn = disc_mask((side, side), spacing)
        image = synthetic_region(patch, slice(0, side), slice(0, side))
        case = f"{side} px, spacing {spacing}, contrast {contrast}: {got}"
        assert got["chunk"] < side  # objects cross chunk borders
        assert got["n"] == expected_objects((side, side), spacing), case
        assert abs(got["median"] - DISC_AREA) <= 0.1 * DISC_AREA, case
        assert abs(got["total"] - drawn.sum()) <= 0.1 * drawn.sum(), case  # the cut discs at the edges too
        truth = float(np.median(image[drawn]))
        assert abs(got["intensity"] - truth) <= 0.05 * truth, f"{case}; drawn {truth}"


def test_an_image_without_objects_stops_at_the_threshold_checkpoint(host: KernelHost, tmp_path: Path) -> None:
    # values 20 and 21 only: no smoothed pixel reaches 5 robust sigmas above the median
    flat = np.random.default_rng(3).integers(20, 22, (1024, 1024)).astype(np.uint8)
    source = tmp_path / "empty.tif"
    tifffile.imwrite(source, flat, tile=(256, 256))
    set_inputs(host, source, tmp_path / "labels.zarr")
    blocks = seedlib.code_blocks(seedlib.read("large-image"))
    label_block = next(i for i, b in enumerate(blocks) if "label_chunk" in b)
    for block in blocks[:label_block]:
        ok(host, block)
    status, text = run(host, blocks[label_block])
    assert status == "error"
    assert "no pixel is above the threshold" in text
    assert not (tmp_path / "labels.zarr").exists()
    assert ok(host, "print(1 + 1)").strip() == "2"


def test_an_ome_zarr_is_opened_lazily_through_open_image_and_its_areas_get_units(
    host: KernelHost, tmp_path: Path
) -> None:
    """An OME-Zarr pyramid (written by ome-zarr, a channel axis of one) is opened through
    open_image's lazy level 0 and its plane copied once, uncompressed (each task reads its chunk's
    margin from it); the pixel size in its metadata reaches the areas."""
    import warnings

    import zarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ome-zarr's own, at import
        from ome_zarr.format import FormatV05
        from ome_zarr.writer import write_image

    side = 1024
    region = synthetic_region(synthetic_patch(), slice(0, side), slice(0, side))
    source = tmp_path / "plate.ome.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the writer's default-scale warning for c
        write_image(
            region[None],
            zarr.open_group(source, mode="w", zarr_format=3),
            scale_factors=(2,),
            axes="cyx",
            fmt=FormatV05(),
            scale={"y": 0.65, "x": 0.65},
            axes_units={"y": "micrometer", "x": "micrometer"},
            storage_options={"chunks": (1, 256, 256)},
        )
    set_inputs(host, source, tmp_path / "labels.zarr")
    printed = "".join(ok(host, block) for block in seedlib.code_blocks(seedlib.read("large-image")))
    got = value(host, "{'n': int(n_objects), 'px': pixel_size_um, 'copy': os.path.exists(stem + '-source.zarr')}")
    assert got["n"] == expected_objects((side, side))
    assert got["px"] == 0.65 and got["copy"]
    assert "pixel size: z not recorded, y 0.65 µm, x 0.65 µm" in printed and " um2" in printed
