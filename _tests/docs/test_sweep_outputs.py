"""outputs reference: a name the user gives wins over the naming rule, and show() can stretch to
the background so unevenness stays visible."""

from __future__ import annotations

import io
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import tifffile

from _tests.support import seedlib
from _tests.support.sweeplib import disc, run_doc

pytestmark = pytest.mark.slow


def test_a_name_the_user_gives_wins(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    source = tmp_path / "plate1_A01.ome.tif"
    raw = np.arange(32 * 32, dtype=np.uint16).reshape(32, 32)
    tifffile.imwrite(source, raw)
    labels = np.zeros((32, 32), np.int32)
    labels[4:10, 4:10] = 7
    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    run_doc(kernel, "outputs", {"source_path": str(source), "labels": labels}, [], tmp_path)
    kernel.run(
        "a = save_labels(labels, 'nuclei-labels', user_name='masks.tif')\n"
        f"b = save_table({{'label': [7]}}, 'measure', user_name={str(elsewhere / 'table.csv')!r})\n"
        "c = save_table({'label': [7]}, 'measure')\n"
        f"open({str(tmp_path / 'paths.txt')!r}, 'w').write('\\n'.join(map(str, (a, b, c))))"
    )
    a, b, c = (tmp_path / "paths.txt").read_text().splitlines()
    assert Path(a) == tmp_path / "results" / "masks.tif"  # the user's name, in results/
    assert Path(b) == elsewhere / "table.csv"  # the user's folder and name
    assert Path(c) == tmp_path / "results" / "plate1_A01_measure.csv"  # unnamed: the rule
    np.testing.assert_array_equal(tifffile.imread(a), labels)
    assert not list((tmp_path / "results").glob("plate1_A01_nuclei-labels*"))
    with pytest.raises(seedlib.KernelError, match="refusing to overwrite the raw data"):
        kernel.run(f"save_labels(labels, 'x', user_name={str(source)!r})")


def test_show_can_stretch_to_the_background(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """A 20 % background ramp under bright objects: the default stretch squeezes it, the background one shows it."""
    shape = (128, 128)
    ramp = 400 + 80 * np.linspace(0, 1, shape[1])[None, :] * np.ones(shape)
    objects = np.zeros(shape, bool)
    for c in [(30, 30), (30, 90), (90, 30), (90, 90), (64, 64)]:
        objects |= disc(shape, c, 12)
    image = ramp + 4000 * objects
    background = ~objects
    run_doc(kernel, "outputs", {"source_path": str(tmp_path / "raw.tif"), "image": image}, [], tmp_path)
    spans = []
    for call in ("show(image)", "show(image, percentiles=(1, 60))"):
        kernel.run(call)
        png = iio.imread(io.BytesIO(kernel.last_images[0]), extension=".png").astype(float)
        grey = png[..., 0] if png.ndim == 3 else png
        grey = grey[:: grey.shape[0] // shape[0], :: grey.shape[1] // shape[1]]  # enlarged by whole pixels
        left, right = grey[:, :8][background[:, :8]].mean(), grey[:, -8:][background[:, -8:]].mean()
        spans.append(right - left)
    assert spans[0] < 10, f"default stretch: background ramp spans {spans[0]:.0f} grey levels"
    assert spans[1] > 150, f"background stretch: ramp spans only {spans[1]:.0f} grey levels"
