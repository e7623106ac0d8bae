"""Which names a cell binds and reads: what the setup cell of a session notebook is built from."""

from __future__ import annotations

from biopb_mcp.kernel.cell_names import MAX_PARSED_CHARS, cell_names


def test_top_level_bindings_of_every_kind_count_and_function_locals_do_not() -> None:
    code = (
        "import numpy as np, skimage.filters\n"
        "from scipy import ndimage as ndi\n"
        "x, (y, z) = 1, (2, 3)\n"
        "for i in range(3):\n    total = i\n"
        "with open('f') as fh:\n    pass\n"
        "try:\n    pass\nexcept ValueError as err:\n    pass\n"
        "def helper(a):\n    local = a\n    return local + threshold\n"
        "class Model:\n    field = 1\n"
        "squares = [k * k for k in range(3)]\n"
    )
    names = cell_names(code)
    assert names.binds == {
        "np",
        "skimage",
        "ndi",
        "x",
        "y",
        "z",
        "i",
        "total",
        "fh",
        "err",
        "helper",
        "Model",
        "squares",
    }
    assert names.free == {"range", "open", "ValueError", "threshold"}  # locals, loop and comprehension names are not


def test_ipython_syntax_is_read_through_its_python_form() -> None:
    names = cell_names("%matplotlib inline\nfiles = !ls\nimg = load(files[0])")
    assert {"files", "img"} <= names.binds and "load" in names.free


def test_code_that_does_not_parse_or_is_huge_binds_and_reads_nothing() -> None:
    assert cell_names("def broken(:\n").binds == frozenset()
    huge = cell_names("x = 1\n" + "#" * MAX_PARSED_CHARS)
    assert huge.binds == frozenset() and huge.free == frozenset()
