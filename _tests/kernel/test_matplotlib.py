"""Matplotlib figures come back to the agent as PNGs, even when the user's shell names another backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _tests.support.kernel_helpers import make_settings
from biopb_mcp.kernel import KernelHost
from biopb_mcp.server.kernel_text import rendered_text

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
    ex = host.submit(code)
    assert host.wait(ex, 60), f"{code!r} did not finish"
    assert ex.status == "ok", rendered_text(host.render(ex))
    r = host.render(ex)
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
