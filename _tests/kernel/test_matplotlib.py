"""Matplotlib figures come back to the agent as PNGs, even when the user's shell names another backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
        assert png.getpixel((34, 60)) == (255, 51, 51)  # the outline, drawn in red (column 100 / step 3)
        assert png.getpixel((60, 60)) != (255, 51, 51)
    bad = agg_host.submit("show(np.zeros((5, 64, 64)))")
    assert agg_host.wait(bad, 60)
    assert "for a stack, show a projection" in rendered_text(agg_host.render(bad))


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
    assert agg_host.query_when_idle("__import__('json').dumps(1)") == 1  # a silent request between cells
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
