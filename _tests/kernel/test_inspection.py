"""inspect_object in a real kernel: data objects by their facts, not their class's docstring."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from _tests.support.runner import finish_ok
from biopb_mcp.kernel import KernelHost
from biopb_mcp.text.kernel import inspection_text, rendered_text

pytestmark = pytest.mark.slow


def describe(host: KernelHost, path: str) -> str:
    """inspect_object's answer: the kernel's facts about ``path``, in the words the agent reads."""
    return inspection_text(host.probes.inspect(path))


def run(host: KernelHost, code: str, timeout: float = 60) -> str:
    return rendered_text(finish_ok(host, code, timeout))


def test_a_512_square_array_is_shape_dtype_range_and_a_short_repr_not_numpys_class_doc(host: KernelHost) -> None:
    run(host, "import numpy as np\nimg = (np.arange(512 * 512) % 251).astype(np.uint8).reshape(512, 512)")
    text = describe(host, "img")
    assert "img: numpy.ndarray" in text and "shape: (512, 512)" in text and "dtype: uint8" in text
    assert "range: 0 .. 250" in text and "262,144 elements, 256.0 KiB" in text
    assert "doc" not in text and "homogeneous" not in text, text
    assert len(text) < 700, len(text)


def test_a_float_array_range_skips_nans_and_says_how_many(host: KernelHost) -> None:
    run(host, "import numpy as np\nf = np.array([np.nan, -1.5, 2.0, np.nan])")
    assert "range: -1.5 .. 2.0 (2 NaN)" in describe(host, "f")


def test_functions_classes_and_modules_keep_their_docstrings(host: KernelHost) -> None:
    run(host, "import numpy as np\ndef seg(im, sigma=2.0):\n    'Segment the nuclei.'\n")
    assert "doc:\nSegment the nuclei." in describe(host, "seg")
    assert "doc:\n" in describe(host, "np.ndarray") and "homogeneous" in describe(host, "np.ndarray")
    assert "doc:\n" in describe(host, "np")


def test_another_instance_gets_only_the_first_paragraph_of_its_class_doc(host: KernelHost) -> None:
    run(host, "class Scope:\n    '''A microscope.\n\n    Long details nobody asked for.'''\nscope = Scope()")
    text = describe(host, "scope")
    assert "class doc: A microscope. (more:" in text and "Long details" not in text, text


def test_a_dask_array_is_described_without_computing_it(host: KernelHost, tmp_path: Path) -> None:
    flag = tmp_path / "computed"
    run(
        host,
        "import dask.array as da\n"
        f"def mark(block):\n    open({str(flag)!r}, 'w').close()\n    return block\n"
        "lazy = da.ones((20000, 20000), chunks=1000, dtype='float32').map_blocks(mark)",
    )
    flag.unlink(missing_ok=True)  # map_blocks tried `mark` on an empty block to learn its output type
    text = describe(host, "lazy")
    assert "shape: (20000, 20000)" in text and "dtype: float32" in text
    assert "chunks: (1000, 1000) each, 400 in all" in text and "range: not computed" in text
    assert "doc" not in text and len(text) < 700, text
    assert not flag.exists(), "inspecting a dask array ran its graph"


def test_a_pil_image_and_a_zarr_array_give_size_mode_chunks(host: KernelHost) -> None:
    run(
        host,
        "from PIL import Image\nimport zarr, numpy as np\n"
        "pic = Image.fromarray(np.full((30, 40), 7, dtype=np.uint8))\n"
        "z = zarr.zeros(shape=(100, 100), chunks=(10, 10), dtype='uint16')",
    )
    pic = describe(host, "pic")
    assert "size: 40 x 30 px" in pic and "mode: L" in pic and "range: (7, 7)" in pic and "doc" not in pic, pic
    z = describe(host, "z")
    assert "shape: (100, 100)" in z and "dtype: uint16" in z and "chunks: (10, 10)" in z, z
    assert "range: not computed" in z and "doc" not in z, z


def test_lists_and_dicts_of_arrays_describe_each_element_in_one_line(host: KernelHost) -> None:
    run(
        host,
        "import numpy as np\nstack = [np.zeros((64, 64), 'uint16') for _ in range(8)]\n"
        "by_name = {'dapi': np.zeros((3, 4)), 'gfp': 'not loaded'}",
    )
    text = describe(host, "stack")
    assert "len: 8" in text and "[0]: numpy.ndarray (64, 64) uint16" in text and "... 3 more" in text, text
    assert len(text) < 800, len(text)
    named = describe(host, "by_name")
    assert "'dapi': numpy.ndarray (3, 4) float64" in named and "'gfp': str 'not loaded'" in named, named


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
def test_a_data_frame_gives_shape_columns_and_a_few_rows(host: KernelHost) -> None:
    run(host, "import pandas as pd\ndf = pd.DataFrame({'area': range(1000), 'label': ['a'] * 1000})")
    text = describe(host, "df")
    assert "shape: (1000, 2)" in text and "area (int64)" in text and "doc" not in text, text
    assert len(text) < 1200, len(text)


@pytest.mark.skipif(importlib.util.find_spec("xarray") is None, reason="xarray is not installed")
def test_an_xarray_data_array_gives_dims_and_range(host: KernelHost) -> None:
    run(host, "import xarray as xr, numpy as np\nxa = xr.DataArray(np.arange(6).reshape(2, 3), dims=('y', 'x'))")
    text = describe(host, "xa")
    assert "dims: y: 2, x: 3" in text and "range: 0 .. 5" in text and "doc" not in text, text
