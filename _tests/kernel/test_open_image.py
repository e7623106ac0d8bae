"""open_image() in a real kernel, on files written by writers this project does not control:
tifffile's OME and ImageJ writers, ome-zarr's NGFF 0.4 and 0.5 writers, imageio's PNG. Every fact
it reports must equal what the writer was told, and a fact the writer was not told is None."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import psutil
import pytest
from mcp import Client

from _tests.support.isolation import make_settings
from _tests.support.results import output_of
from _tests.support.runner import finish, finish_ok, run_to_end
from biopb_mcp.kernel import KernelHost
from biopb_mcp.server import build_server
from biopb_mcp.text.install import install_command
from biopb_mcp.text.kernel import rendered_text

pytestmark = pytest.mark.anyio

WIN = {"start": 0, "end": 1000, "min": 0, "max": 65535}
"""ome-zarr requires a display window for each omero channel."""


def write_files(root: Path) -> dict[str, dict[str, Any]]:
    """Write one file per case and return what each writer was told, as open_image should say it."""
    import imageio.v3 as iio
    import tifffile
    import zarr
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image

    rng = np.random.default_rng(0)
    tczyx = rng.integers(0, 1000, (3, 2, 4, 16, 24), dtype=np.uint16)
    tzyx = rng.integers(0, 1000, (5, 3, 16, 24), dtype=np.uint16)
    yx = rng.integers(0, 255, (16, 24), dtype=np.uint8)
    want: dict[str, dict[str, Any]] = {}

    def ome(name: str, unit: str, f: float, t_unit: str, t: float) -> None:
        meta = {"axes": "TCZYX", "Channel": {"Name": ["DAPI", "GFP"]}, "TimeIncrement": t, "TimeIncrementUnit": t_unit}
        for axis, size in (("X", 0.1083), ("Y", 0.1083), ("Z", 0.5)):
            meta[f"PhysicalSize{axis}"] = size * f
            meta[f"PhysicalSize{axis}Unit"] = unit
        tifffile.imwrite(root / name, tczyx, metadata=meta)
        want[name] = {
            "dims": "TCZYX",
            "shape": list(tczyx.shape),
            "pixel_size_um": [0.5, 0.1083, 0.1083],
            "channel_names": ["DAPI", "GFP"],
            "time_interval_s": 2.5,
            "sum": int(tczyx.sum()),
        }

    ome("um.ome.tif", "µm", 1.0, "s", 2.5)
    ome("nm.ome.tif", "nm", 1000.0, "ms", 2500.0)

    # no TimeIncrement, only each plane's DeltaT (in ms), as many converters write it
    deltas = [t * 1500.0 + c * 100.0 for t in range(3) for c in range(2) for _ in range(4)]
    tifffile.imwrite(
        root / "deltat.ome.tif",
        tczyx,
        metadata={"axes": "TCZYX", "Plane": {"DeltaT": deltas, "DeltaTUnit": ["ms"] * len(deltas)}},
    )
    want["deltat.ome.tif"] = {"dims": "TCZYX", "time_interval_s": 1.5, "pixel_size_um": [None, None, None]}

    def imagej(name: str, unit: str) -> None:
        meta = {"axes": "TZYX", "spacing": 0.3, "unit": unit, "finterval": 1.5}
        tifffile.imwrite(root / name, tzyx, imagej=True, resolution=(1 / 0.108, 1 / 0.108), metadata=meta)
        want[name] = {
            "dims": "TZYX",
            "shape": list(tzyx.shape),
            "pixel_size_um": [0.3, 0.108, 0.108],
            "channel_names": [],
            "time_interval_s": 1.5,
            "sum": int(tzyx.sum()),
        }

    imagej("imagej_um.tif", "um")
    imagej("imagej_micron.tif", "micron")
    imagej("imagej_escaped.tif", "\\u00B5m")  # how ImageJ itself writes µm in its description

    # a TIFF calibrated through its resolution tags alone, in pixels per centimetre
    tifffile.imwrite(root / "cm.tif", yx, resolution=(1e4 / 0.25, 1e4 / 0.25), resolutionunit="CENTIMETER")
    want["cm.tif"] = {"dims": "YX", "shape": [16, 24], "pixel_size_um": [None, 0.25, 0.25]}
    tifffile.imwrite(root / "plain.tif", yx)
    want["plain.tif"] = {"dims": "YX", "shape": [16, 24], "pixel_size_um": [None, None, None], "channel_names": []}
    # dots per inch is a print setting, not a microscope's pixel size
    tifffile.imwrite(root / "dpi.tif", yx, resolution=(72.0, 72.0), resolutionunit="INCH")
    want["dpi.tif"] = {"dims": "YX", "shape": [16, 24], "pixel_size_um": [None, None, None]}
    iio.imwrite(root / "plain.png", yx)
    want["plain.png"] = {
        "dims": "YX",
        "shape": [16, 24],
        "pixel_size_um": [None, None, None],
        "channel_names": [],
        "time_interval_s": None,
        "sum": int(yx.sum()),
    }

    with tifffile.TiffWriter(root / "scenes.ome.tif", ome=True) as w:
        w.write(tczyx[0, 0], metadata={"axes": "ZYX", "PhysicalSizeX": 0.2, "PhysicalSizeY": 0.2, "Name": "first"})
        w.write(tczyx[0, 0, 0], metadata={"axes": "YX", "PhysicalSizeX": 0.4, "PhysicalSizeY": 0.4, "Name": "second"})
    want["scenes.ome.tif"] = {"scenes": 2, "pixel_size_um": [None, 0.2, 0.2]}

    zdata = rng.integers(0, 1000, (3, 2, 8, 64, 64), dtype=np.uint16)
    channels = [{"label": "DAPI", "color": "0000FF", "window": WIN}, {"label": "GFP", "color": "00FF00", "window": WIN}]
    for fmt, name, unit, f in (
        (FormatV04(), "v04.ome.zarr", "micrometer", 1.0),
        (FormatV05(), "v05.ome.zarr", "nanometer", 1000.0),
    ):
        group = zarr.open_group(root / name, mode="w", zarr_format=fmt.zarr_format)
        write_image(
            zdata,
            group,
            scale_factors=(2, 4),
            axes="tczyx",
            fmt=fmt,
            scale={"t": 4.0, "c": 1.0, "z": 0.5 * f, "y": 0.1083 * f, "x": 0.1083 * f},
            axes_units={"t": "second", "z": unit, "y": unit, "x": unit},
            omero={"channels": channels},
        )
        want[name] = {
            "dims": "TCZYX",
            "shape": list(zdata.shape),
            "pixel_size_um": [0.5, 0.1083, 0.1083],
            "channel_names": ["DAPI", "GFP"],
            "time_interval_s": 4.0,
            "levels": 3,
            "sum": int(zdata.sum()),
        }
    # Zeiss's own CZI writer (pylibCZIrw, which bioio-czi reads with): scaling in metres
    from pylibCZIrw import czi as pyczi

    with pyczi.create_czi(str(root / "zeiss.czi"), exist_ok=True) as w:
        for c in range(2):
            for z in range(3):
                w.write(tczyx[0, c, z], plane={"C": c, "Z": z, "T": 0})
        w.write_metadata(channel_names={0: "DAPI", 1: "GFP"}, scale_x=0.1083e-6, scale_y=0.1083e-6, scale_z=0.5e-6)
    want["zeiss.czi"] = {
        "dims": "TCZYX",
        "shape": [1, 2, 3, 16, 24],
        "pixel_size_um": [0.5, 0.1083, 0.1083],
        "channel_names": ["DAPI", "GFP"],
        "time_interval_s": None,
        "sum": int(tczyx[0, :, :3].sum()),
    }
    with pyczi.create_czi(str(root / "uncalibrated.czi"), exist_ok=True) as w:
        w.write(yx.astype(np.uint16), plane={"C": 0, "Z": 0, "T": 0})
    want["uncalibrated.czi"] = {"pixel_size_um": [None, None, None], "channel_names": []}
    # a store whose writer was given no scale: ome-zarr writes 1.0 with no unit, which is no size
    group = zarr.open_group(root / "unitless.ome.zarr", mode="w", zarr_format=2)
    write_image(zdata[0, 0], group, scale_factors=(2,), axes="zyx", fmt=FormatV04())
    want["unitless.ome.zarr"] = {"dims": "ZYX", "pixel_size_um": [None, None, None]}
    return want


FACTS = """
import json, warnings
def _facts(path, **kw):
    im = open_image(path, **kw)
    return {"dims": im.dims, "shape": list(im.shape), "pixel_size_um": list(im.pixel_size_um),
            "channel_names": im.channel_names, "time_interval_s": im.time_interval_s,
            "scenes": len(im.scenes), "levels": len(im.level_shapes), "lazy": im.lazy,
            "data": [type(im.data).__module__.split(".")[0], list(im.data.shape)], "repr": repr(im),
            "sum": int(im.data.sum())}
"""


@pytest.fixture(scope="module")
def files(module_root: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    root = module_root / "files"
    root.mkdir()
    with warnings.catch_warnings():
        # the writers' own deprecation and default-scale warnings are theirs, not ours
        warnings.simplefilter("ignore")
        return root, write_files(root)


@pytest.fixture(scope="module")
def image_host(module_root: Path) -> Iterator[KernelHost]:
    h = KernelHost(make_settings(module_root / "cfg", kernel="request_timeout = 20.0\nlazy_image_mb = 0.5\n"))
    h.start()
    finish_ok(h, FACTS)
    try:
        yield h
    finally:
        h.shutdown()


def facts_of(host: KernelHost, call: str) -> dict[str, Any]:
    page = finish_ok(host, f"print(json.dumps(_facts({call})))")
    text = rendered_text(page)
    return dict(json.loads(text[text.index("{") : text.rindex("}") + 1]))


def test_every_fact_equals_what_the_writer_recorded(image_host: KernelHost, files: tuple[Path, dict]) -> None:
    root, want = files
    code = f"print(json.dumps({{n: _facts({str(root)!r} + '/' + n) for n in {sorted(want)!r}}}))"
    text = rendered_text(finish_ok(image_host, code))
    got = json.loads(text[text.index("{") : text.rindex("}") + 1])
    for name, expected in want.items():
        for key, value in expected.items():
            if key == "scenes":
                assert got[name]["scenes"] == value, name
            elif key == "levels":
                assert got[name]["levels"] == value, name
            elif key == "pixel_size_um":
                assert got[name][key] == pytest.approx(value) if None not in value else got[name][key] == value, (
                    name,
                    got[name],
                )
            else:
                assert got[name][key] == value, (name, key, got[name])
        # what the file lacks is said in the repr, never filled in
        if got[name]["pixel_size_um"][2] is None:
            assert "x not recorded" in got[name]["repr"] and "ask the user" in got[name]["repr"], got[name]["repr"]
        assert got[name]["data"][1] == got[name]["shape"]
    assert "0.1083 µm" in got["nm.ome.tif"]["repr"] and "'DAPI', 'GFP'" in got["nm.ome.tif"]["repr"]
    assert "time interval: 1.5 s" in got["imagej_um.tif"]["repr"]
    assert "dots per inch" in got["dpi.tif"]["repr"]


def test_scene_and_pyramid_level_choose_what_is_read_and_the_pixel_size_follows(
    image_host: KernelHost, files: tuple[Path, dict]
) -> None:
    root, _ = files
    second = facts_of(image_host, f"{str(root / 'scenes.ome.tif')!r}, scene=1")
    assert second["pixel_size_um"] == [None, 0.4, 0.4] and second["shape"][-2:] == [16, 24]
    by_name = facts_of(image_host, f"{str(root / 'scenes.ome.tif')!r}, scene='Image:1'")
    assert by_name["pixel_size_um"] == second["pixel_size_um"]
    level2 = facts_of(image_host, f"{str(root / 'v05.ome.zarr')!r}, level=2")
    assert level2["shape"] == [3, 2, 8, 16, 16] and level2["data"][1] == [3, 2, 8, 16, 16]
    assert level2["pixel_size_um"] == pytest.approx([0.5, 0.4332, 0.4332])
    text = rendered_text(finish(image_host, f"open_image({str(root / 'scenes.ome.tif')!r}, scene=5)")[1])
    assert "no scene 5; its scenes are ['Image:0', 'Image:1']" in text
    text = rendered_text(finish(image_host, f"open_image({str(root / 'v04.ome.zarr')!r}, level=3)")[1])
    assert "pyramid levels [0, 1, 2]; level 3 is not one of them" in text


def test_an_image_over_the_configured_size_is_a_lazy_dask_array(
    image_host: KernelHost, files: tuple[Path, dict]
) -> None:
    root, _ = files
    # lazy_image_mb = 0.5 in this kernel's config: the 393 kB store is numpy, 1.2 MB of TIFF is not
    small = facts_of(image_host, repr(str(root / "v04.ome.zarr")))
    assert small["lazy"] is False and small["data"][0] == "numpy"
    finish_ok(
        image_host,
        f"big = {str(root / 'big.tif')!r}\nimport tifffile, numpy\ntifffile.imwrite(big, numpy.zeros((600, 1024), 'uint16'))",
    )
    big = facts_of(image_host, "big")
    assert big["lazy"] is True and big["data"][0] == "dask" and "lazy dask array" in big["repr"]
    forced = facts_of(image_host, "big, lazy=False")
    assert forced["data"][0] == "numpy"


def test_a_missing_vendor_reader_is_one_sentence_naming_the_extra(image_host: KernelHost, module_root: Path) -> None:
    fake = module_root / "scope.nd2"
    fake.write_bytes(b"not really an nd2 file")
    # a kernel without bioio-nd2: importing it fails, as in an environment without the extra
    ex, page = finish(
        image_host,
        "import sys\n_saved = sys.modules.get('bioio_nd2')\nsys.modules['bioio_nd2'] = None\n"
        f"try:\n    open_image({str(fake)!r})\nfinally:\n    sys.modules.pop('bioio_nd2')\n"
        "    if _saved is not None: sys.modules['bioio_nd2'] = _saved",
    )
    assert ex.status == "error" and ex.error is not None
    ename, evalue, traceback = ex.error
    assert ename == "ReaderMissing"
    assert evalue == (
        "Reading Nikon ND2 files needs the bioio-nd2 reader, which this kernel's Python does not have: "
        f"install it with {install_command('formats')} (or pip install bioio-nd2) and restart the kernel."
    )
    assert "'biopb-mcp[formats]'" not in evalue  # the bare name on PyPI is another project's
    # what the agent reads ends in that sentence, with no plugin or bioio frames
    shown = rendered_text(page) + "".join(traceback)
    assert shown.rstrip().endswith("and restart the kernel.") and "ReaderMissing" in shown
    assert "bioio" not in shown.replace("bioio-nd2", "").replace("bioio_nd2", "")


def test_opening_through_an_mcp_session_shows_the_facts_at_a_glance(
    module_root: Path, files: tuple[Path, dict]
) -> None:
    root, _ = files
    settings = make_settings(module_root / "mcp", kernel="request_timeout = 20.0\n")

    async def go() -> str:
        mcp, state = build_server(settings)
        try:
            async with Client(mcp) as client:
                await client.call_tool("start_kernel", {})
                result = await run_to_end(client, f"im = open_image({str(root / 'nm.ome.tif')!r})\nim")
                return output_of(result)
        finally:
            state.kernel.shutdown()

    text = anyio.run(go)
    assert "OME-TIFF via bioio-ome-tiff" in text
    assert "pixel size: z 0.5 µm, y 0.1083 µm, x 0.1083 µm" in text
    assert "channels: 'DAPI', 'GFP'" in text and "time interval: 2.5 s" in text
    assert "PhysicalSizeX=108.3 nm" in text  # where the fact came from, in the file's own unit


def test_a_2gb_ome_zarr_opens_lazily_in_little_kernel_memory(module_root: Path) -> None:
    """A 2.1 GB store written as metadata only (every chunk the fill value), opened in a fresh
    kernel: its repr reads no chunk and imports no reader; the kernel's memory is measured around
    the call, imports included."""
    import zarr
    from ome_zarr.format import FormatV04

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ome-zarr's own, at import
        from ome_zarr.writer import write_multiscales_metadata

    path = module_root / "big.ome.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    shape = (1, 1, 256, 2048, 2048)
    group.create_array("0", shape=shape, chunks=(1, 1, 16, 512, 512), dtype="uint16", fill_value=0)
    axes = [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"}]
    axes += [{"name": a, "type": "space", "unit": "micrometer"} for a in "zyx"]
    datasets = [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1.0, 0.2, 0.2]}]}]
    write_multiscales_metadata(group, datasets, fmt=FormatV04(), axes=axes)
    host = KernelHost(make_settings(module_root / "fresh", kernel="request_timeout = 20.0\n"))
    host.start()
    try:
        pid = int(rendered_text(finish_ok(host, "import os; print(os.getpid())")).strip())
        before = psutil.Process(pid).memory_info().rss
        page = finish_ok(
            host, f"im = open_image({str(path)!r})\nprint(im)\nprint('bioio' in __import__('sys').modules)"
        )
        grown = psutil.Process(pid).memory_info().rss - before
        text = rendered_text(page)
        assert "lazy dask array" in text and "2.1 GB" in text, text
        assert "pixel size: z 1 µm, y 0.2 µm, x 0.2 µm" in text
        assert text.strip().endswith("False")  # the facts came from the store's JSON alone
        assert grown < 100e6, f"opening the 2.1 GB store grew the kernel by {grown / 1e6:.0f} MB"
        # the pixels stay lazy: a projection over Z is a graph until computed
        lazy = rendered_text(
            finish_ok(host, "mip = im.data.max(axis=im.axis('Z'))\nprint(type(mip).__module__, mip.shape)")
        )
        assert lazy.split()[0].startswith("dask") and "(1, 1, 2048, 2048)" in lazy
    finally:
        host.shutdown()


def test_what_the_save_helpers_write_reopens_with_its_units(image_host: KernelHost, module_root: Path) -> None:
    """save_labels and save_image (the built-in save helpers) write OME-TIFF with the pixel size,
    given as a number or as open_image's (z, y, x): open_image reads it back in µm."""
    work = module_root / "saved"
    work.mkdir()
    code = (
        "import numpy as np, json\n"
        f"source_path = {str(work / 'raw.ome.tif')!r}\n"
        "labels = np.zeros((32, 40), np.uint16); labels[4:10, 5:12] = 1\n"
        "stack = np.arange(3 * 32 * 40, dtype=np.uint16).reshape(3, 32, 40)\n"
        "a = save_labels(labels, 'nuclei', pixel_size_um=0.1083)\n"
        "b = save_image(stack, 'stack', pixel_size_um=(0.5, 0.1083, 0.1083), axes='ZYX')\n"
        "c = save_image(stack, 'stack-guessed', pixel_size_um=(0.5, 0.1083, 0.1083))\n"
        "got = {}\n"
        "for p, arr in ((a, labels), (b, stack), (c, stack)):\n"
        "    im = open_image(p)\n"
        "    got[str(p)] = {'px': list(im.pixel_size_um), 'same': bool((np.asarray(im.get(T=0, C=0)) == arr).all())}\n"
        "print(json.dumps(got))\n"
    )
    text = rendered_text(finish_ok(image_host, code))
    got = json.loads(text[text.index("{") : text.rindex("}") + 1])
    (labels_file, labels_facts), (_, stack_facts), (_, guessed_facts) = got.items()
    assert labels_file.endswith(".tif") and labels_facts["same"]
    assert labels_facts["px"][1:] == [0.1083, 0.1083]
    assert stack_facts["px"] == [0.5, 0.1083, 0.1083] and stack_facts["same"]
    # a 3-D image given a z step is a z-stack: the step is kept (it was dropped as channels)
    assert guessed_facts == stack_facts
