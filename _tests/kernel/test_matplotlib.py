"""Matplotlib figures come back to the agent as PNGs, even when the user's shell names another backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _tests.support.isolation import make_settings
from _tests.support.runner import finish_ok
from biopb_mcp.kernel import KernelHost
from biopb_mcp.text.kernel import rendered_text

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def agg_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHost]:
    """A real kernel started from a server whose environment says MPLBACKEND=Agg (shows nothing)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MPLBACKEND", "Agg")
    h = KernelHost(make_settings(Path(tmp_path_factory.mktemp("mpl")), kernel="request_timeout = 20.0\n"))
    try:
        h.start()
        yield h
    finally:
        h.shutdown()
        mp.undo()


def run(host: KernelHost, code: str) -> tuple[str, list[bytes]]:
    r = finish_ok(host, code)
    return rendered_text(r), r.images


def test_kernel_start_does_not_import_matplotlib(agg_host: KernelHost) -> None:
    text, _ = run(agg_host, "import sys; print('matplotlib' in sys.modules)")
    assert text == "False"


def test_plt_show_and_an_open_figure_both_come_back_as_png(agg_host: KernelHost) -> None:
    _, shown = run(agg_host, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()")
    assert len(shown) == 1 and shown[0].startswith(b"\x89PNG")
    _, left_open = run(agg_host, "fig, ax = plt.subplots()\nax.hist([1, 2, 2, 3, 3, 3]);")
    assert len(left_open) == 1 and left_open[0].startswith(b"\x89PNG")
    _, after = run(agg_host, "x = 1")
    assert after == [], "a figure is shown once, not again after the next call"


def test_a_figure_left_open_under_agg_chosen_in_code_still_comes_back_once(agg_host: KernelHost) -> None:
    # matplotlib.use("Agg") in the agent's code: plt.show() shows nothing, the figure stays open
    text, shown = run(
        agg_host,
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 3, 2])\nplt.show()\nprint(matplotlib.get_backend())",
    )
    assert text.splitlines()[0].lower() == "agg" and len(shown) == 1 and shown[0].startswith(b"\x89PNG")
    _, after = run(agg_host, "print(len(plt.get_fignums()))")
    assert after == [], "the figure was closed once sent"
    _, two = run(agg_host, "fig1 = plt.figure(); fig2 = plt.figure(); fig1.gca().plot([0, 1]); fig2.gca().plot([1, 0])")
    assert len(two) == 2


def test_show_is_preloaded_and_sends_a_bounded_png(agg_host: KernelHost) -> None:
    from PIL import Image

    text, shown = run(
        agg_host,
        "import numpy as np\nimg = np.random.default_rng(0).normal(100, 10, (2000, 1500))\n"
        "labels = np.zeros(img.shape, int); labels[100:400, 100:400] = 1\nshow(img, labels)",
    )
    assert len(shown) == 1, text
    with Image.open(__import__("io").BytesIO(shown[0])) as png:
        assert max(png.size) <= 768 and png.mode == "RGB"
        assert png.getpixel((34, 60)) == (255, 64, 64)  # the outline, drawn in red (column 100 / step 3)
        seam = png.getpixel((33, 60))
        assert isinstance(seam, tuple) and max(seam) < 60  # a dark seam beside it
        assert png.getpixel((60, 60)) != (255, 64, 64)
    bad = agg_host.jobs.submit("show(np.zeros((2, 5, 64, 64)))")
    assert agg_host.jobs.wait(bad, 60)
    assert "show(stack.max(axis=0))" in rendered_text(agg_host.jobs.render(bad))


def _png(data: bytes) -> Any:
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(data)) as png:
        return np.asarray(png.convert("RGB"))


def test_show_enlarges_a_small_image_so_outlines_on_bright_and_dark_objects_are_seen(agg_host: KernelHost) -> None:
    import numpy as np

    _, shown = run(
        agg_host,
        "import numpy as np\nsmall = np.full((64, 64), 100.0); small[8:24, 8:24] = 4000; small[40:56, 40:56] = 120\n"
        "lab = np.zeros((64, 64), int); lab[8:24, 8:24] = 1; lab[40:56, 40:56] = 2\nshow(small, lab)",
    )
    png = _png(shown[0])
    assert png.shape[1] >= 256 and png.shape[0] == png.shape[1], png.shape  # square, enlarged
    scale = png.shape[1] // 64
    red = np.all(png == (255, 64, 64), axis=-1)
    for y0, x0 in ((8, 8), (40, 40)):  # the bright object and the dim one
        box = (slice(y0 * scale - 2, (y0 + 16) * scale + 2), slice(x0 * scale - 2, (x0 + 16) * scale + 2))
        assert red[box].sum() >= 4 * 16 * scale, "a closed outline along the object's edge"
        inside = png[y0 * scale + 4 : (y0 + 16) * scale - 4, x0 * scale + 4 : (x0 + 16) * scale - 4]
        assert not np.all(inside == (255, 64, 64), axis=-1).any(), "the outline stays at the edge"
    # the bright object's outline has a dark seam inside it: the red line does not melt into white
    row = png[16 * scale, 8 * scale : 12 * scale]
    assert (row.max(axis=-1) < 60).any(), row


def test_show_colours_labels_by_group_and_draws_several_label_sets_apart(agg_host: KernelHost) -> None:
    import numpy as np

    _, shown = run(
        agg_host,
        "img = np.zeros((96, 96)); lab = np.zeros((96, 96), int)\n"
        "for i, (y, x) in enumerate([(10, 10), (10, 60), (60, 10), (60, 60)], start=1):\n"
        "    img[y:y + 20, x:x + 20] = 1000; lab[y:y + 20, x:x + 20] = i\n"
        "positive = np.array([True, False, False, True])\n"
        "show(img, lab, color_by=positive, title='positive cells')",
    )
    png = _png(shown[0])
    scale = png.shape[1] // 96
    top = png.shape[0] - 96 * scale  # the title band
    assert top > 0 and (png[:top].max(axis=-1) > 200).any(), "the title is drawn"
    green = np.all(png == (51, 255, 51), axis=-1)
    magenta = np.all(png == (255, 51, 255), axis=-1)
    for (y, x), positive in zip([(10, 10), (10, 60), (60, 10), (60, 60)], [True, False, False, True], strict=True):
        box = (slice(top + y * scale - 2, top + (y + 20) * scale + 2), slice(x * scale - 2, (x + 20) * scale + 2))
        ours, other = (green, magenta) if positive else (magenta, green)
        assert ours[box].sum() > 40 and other[box].sum() == 0, (y, x, positive)
    # two label sets: each in its own colour
    _, shown = run(agg_host, "other = np.zeros_like(lab); other[30:50, 30:50] = 1\nshow(img, [lab, other])")
    png = _png(shown[0])
    assert np.all(png == (255, 64, 64), axis=-1).any() and np.all(png == (51, 230, 255), axis=-1).any()


def test_show_draws_a_stack_as_a_panel_of_its_planes(agg_host: KernelHost) -> None:
    _, shown = run(
        agg_host, "stack = np.random.default_rng(1).random((3, 64, 64))\nshow(stack, titles=['DAPI', 'GFP', 'RFP'])"
    )
    png = _png(shown[0])
    assert len(shown) == 1 and png.shape[1] >= 3 * 256, png.shape  # three enlarged planes side by side
    _, shown = run(agg_host, "show([stack[0], stack[1]])")
    assert _png(shown[0]).shape[1] > 2 * 256


def test_a_figure_that_cannot_be_drawn_is_named_and_the_others_come_back_to_their_own_cell(
    agg_host: KernelHost,
) -> None:
    text, shown = run(
        agg_host,
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "bad = plt.figure(); bad.gca().set_title(r'$\\notacommand{x}$')\n"
        "good = plt.figure(); good.gca().plot([1, 2])",
    )
    assert len(shown) == 1 and "could not be drawn" in text, text
    assert agg_host.probes.query_when_idle("__import__('json').dumps(1)") == 1  # a silent request between cells
    _, after = run(agg_host, "x = 2")
    assert after == [], "no figure is left to turn up in a later cell"


def test_a_figure_the_cell_displayed_itself_is_not_sent_twice(agg_host: KernelHost) -> None:
    _, shown = run(
        agg_host,
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "from IPython.display import display\nfig = plt.figure(); fig.gca().plot([3, 1])\ndisplay(fig)",
    )
    _, again = run(agg_host, "fig2 = plt.figure(); fig2.gca().plot([1, 3]); fig2")
    assert len(shown) <= 1 and len(again) <= 1, (len(shown), len(again))
