"""In the kernel: figures reach the agent whatever matplotlib's backend, and ``show()`` for arrays.

Loaded by the kernel bootstrap from this file's path (the kernel may be another Python without
biopb_mcp), so it imports only the standard library until used.

IPython's inline backend sends a cell's open figures at its end; under ``Agg`` (set by a script
the agent copied, or by ``MPLBACKEND``) or any other non-interactive backend, ``plt.show()`` does
nothing and the agent would see no figure. So after each cell, a figure still open under such a
backend is sent as a PNG and closed. Interactive backends are left alone: their figures are the
scientist's windows.
"""

from __future__ import annotations

import base64
import io
import sys
from typing import Any

NON_INTERACTIVE = frozenset({"agg", "cairo", "pdf", "pgf", "ps", "svg", "template"})
"""matplotlib's built-in backends that draw to files only (lower-case names)."""


SHOWN = "_biopb_shown"
"""Set on a figure the cell displayed itself (``display(fig)``, or ``fig`` as its last line)."""


def install(ns: dict[str, Any]) -> None:
    """Put ``show`` in the namespace and flush figures after every cell the user or agent runs.

    ``post_run_cell`` fires for those only, not for the silent requests the server sends in
    between (a figure flushed into one of those would reach nobody).
    """
    from IPython import get_ipython

    ns["show"] = show
    shell = get_ipython()
    if shell is not None:
        shell.events.register("pre_run_cell", lambda _info: _mark_displayed(shell))
        shell.events.register("post_run_cell", lambda _result: flush_figures())


def _mark_displayed(shell: Any) -> None:
    """Have the PNG formatter for figures (IPython's, when one is set) mark what it shows, so a
    figure the cell displayed itself is not sent a second time."""
    if "matplotlib.figure" not in sys.modules:
        return
    from matplotlib.figure import Figure

    formatter = shell.display_formatter.formatters.get("image/png")
    try:
        printer = formatter.lookup_by_type(Figure)
    except (KeyError, AttributeError):
        return
    if getattr(printer, SHOWN, False):
        return

    def marking(fig: Any, *args: Any, **kwargs: Any) -> Any:
        setattr(fig, SHOWN, True)
        return printer(fig, *args, **kwargs)

    setattr(marking, SHOWN, True)
    formatter.for_type(Figure, marking)


def flush_figures() -> None:
    """Send every open figure as a PNG and close it, under a non-interactive backend only.

    A figure that cannot be drawn (a bad label, say) is named in one line and closed; the others
    still come back.
    """
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import matplotlib

    if str(matplotlib.get_backend()).lower() not in NON_INTERACTIVE:
        return
    from IPython.display import publish_display_data

    for num in plt.get_fignums():
        fig = plt.figure(num)
        try:
            if getattr(fig, SHOWN, False):
                continue
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
        except Exception as exc:  # the user's figure: say which one failed, keep the rest
            reason = (str(exc).strip().splitlines() or [""])[0]
            publish_display_data({"text/plain": f"[figure {num} could not be drawn: {type(exc).__name__}: {reason}]"})
        else:
            publish_display_data(
                {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": repr(fig)}
            )
        finally:
            plt.close(fig)


def show(image: Any, labels: Any = None, max_side: int = 768, percentiles: tuple[float, float] = (1, 99.8)) -> None:
    """Show a 2-D image (or an RGB one, channels last) to the agent and the notebook as a PNG.

    The image is downsampled so its longer side is at most ``max_side`` (a dask or zarr array
    is read only at that resolution), stretched between the given ``percentiles`` of its
    values, and, with ``labels`` (an integer array of the same shape), the labels' outlines are
    drawn in red. For a stack, show a projection: ``show(stack.max(axis=0))``.
    """
    import numpy as np
    from IPython.core.display import Image
    from IPython.display import display
    from PIL import Image as PILImage

    shape = tuple(getattr(image, "shape", np.shape(image)))
    rgb = len(shape) == 3 and shape[-1] in (3, 4)
    if len(shape) != 2 and not rgb:
        raise ValueError(
            f"show() takes a 2-D image or an RGB one (channels last), not shape {shape}; "
            "for a stack, show a projection: show(stack.max(axis=0))"
        )
    step = max(1, -(-max(shape[:2]) // max_side))
    img = np.asarray(image[::step, ::step], dtype=np.float64)
    lo, hi = np.nanpercentile(img, percentiles)
    img = np.clip((img - lo) / (hi - lo), 0.0, 1.0) if hi > lo else np.zeros_like(img)
    if not rgb:
        img = np.repeat(img[..., None], 3, axis=-1)
    img = img[..., :3]
    if labels is not None:
        lab = np.asarray(labels[::step, ::step])
        if lab.shape != img.shape[:2]:
            raise ValueError(f"labels of shape {np.shape(labels)} do not match the image's {shape[:2]}")
        edge = np.zeros(lab.shape, dtype=bool)
        edge[1:, :] |= lab[1:, :] != lab[:-1, :]
        edge[:, 1:] |= lab[:, 1:] != lab[:, :-1]
        edge &= lab != 0
        img[edge] = (1.0, 0.2, 0.2)
    buf = io.BytesIO()
    PILImage.fromarray((img * 255).round().astype(np.uint8)).save(buf, format="PNG")
    display(Image(data=buf.getvalue()))
