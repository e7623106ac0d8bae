"""Run the reference docs' python snippets (data, outputs) in a real kernel on synthetic files.

The procedures have their own sweep files (test_sweep_<procedure>.py), each covering the range
the procedure states it is validated on; this module keeps the two references whose snippets
read and write files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tifffile

from _tests.support import seedlib
from _tests.support.sweeplib import run_doc

pytestmark = pytest.mark.slow

# ---------------------------------------------------------------- reference snippets (data, outputs)


def test_data_reference_reads_axes_pixel_size_channels_and_pyramid(
    kernel: seedlib.KernelRunner, tmp_path: Path
) -> None:
    rng = np.random.default_rng(12)
    data = rng.integers(0, 4096, (2, 3, 64, 64), dtype=np.uint16)  # 12-bit values in uint16
    path = tmp_path / "stack.ome.tif"
    with tifffile.TiffWriter(path) as tw:
        meta = {
            "axes": "CZYX",
            "PhysicalSizeX": 325.0,
            "PhysicalSizeXUnit": "nm",
            "PhysicalSizeY": 325.0,
            "PhysicalSizeYUnit": "nm",
            "PhysicalSizeZ": 1.5,
            "Channel": {"Name": ["GFP", "DAPI"]},
        }
        tw.write(data, subifds=1, metadata=meta, tile=(32, 32))
        tw.write(data[..., ::2, ::2], subfiletype=1, tile=(32, 32))
    produces = ["dims", "data", "plane", "stack", "pixel_size_um", "z_um", "channel_names", "frame_interval_s"]
    out = run_doc(kernel, "data", {"path": str(path)}, [*produces, "levels", "projection"], tmp_path)
    assert str(out["dims"]) == "TCZYX"
    np.testing.assert_array_equal(out["data"], data[None])
    np.testing.assert_array_equal(out["plane"], data[1, 0])  # the DAPI channel, found by name
    np.testing.assert_array_equal(out["stack"], data[0])  # T=0, C=0: (Z, Y, X)
    np.testing.assert_array_equal(out["projection"], data[0].max(axis=0))
    assert float(out["pixel_size_um"]) == 0.325 and float(out["z_um"]) == 1.5  # nm converted
    assert out["channel_names"].tolist() == ["GFP", "DAPI"]
    assert out["frame_interval_s"].item() is None  # not recorded: None, not invented
    assert [list(s) for s in out["levels"]] == [[1, 2, 3, 64, 64], [1, 2, 3, 32, 32]]


def test_outputs_reference_saves_next_to_the_data_and_shows_png(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    source = tmp_path / "plate1_A01.ome.tif"
    raw = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    tifffile.imwrite(source, raw)
    labels = np.zeros((64, 64), np.int64)
    labels[10:20, 10:20], labels[30:40, 30:50] = 1, 300
    out = run_doc(kernel, "outputs", {"source_path": str(source), "labels": labels, "raw": raw}, [], tmp_path)
    assert out["_images_shown"] == 0
    kernel.run(
        "labels_file = save_labels(labels, 'nuclei-labels', pixel_size_um=0.5)\n"
        "table_file = save_table({'label': [1, 300], 'area_um2': [25.0, 50.0]}, 'measure')\n"
        "show(raw, labels)"
    )
    assert len(kernel.last_images) == 1 and kernel.last_images[0].startswith(b"\x89PNG")
    results = tmp_path / "results"
    saved = tifffile.imread(results / "plate1_A01_nuclei-labels.tif")
    assert saved.dtype == np.uint16
    np.testing.assert_array_equal(saved, labels)
    with tifffile.TiffFile(results / "plate1_A01_nuclei-labels.tif") as tf:
        assert 'PhysicalSizeX="0.5"' in (tf.ome_metadata or "")
    assert (results / "plate1_A01_measure.csv").read_text().splitlines() == ["label,area_um2", "1,25.0", "300,50.0"]
    np.testing.assert_array_equal(tifffile.imread(source), raw)  # raw data untouched
