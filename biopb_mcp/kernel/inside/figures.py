"""In the kernel: figures reach the agent whatever matplotlib's backend, and ``show()`` for arrays.

Loaded by the kernel bootstrap from this file's path (the kernel may be another Python without
biopb_mcp), so it imports only the standard library until used.

``show()`` draws arrays for a person and a model to judge: enlarged when small, outlines that
stand out on bright and dark objects, label sets or groups of labels in distinct colours, a
title, several planes in one panel.

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
        # %reset empties the namespace; show must outlive it like the kernel's own names
        shell.events.register("pre_run_cell", lambda _info: shell.user_ns.setdefault("show", show))
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


MIN_SIDE = 512
"""A small image is enlarged (nearest neighbour, whole pixels) until its longer side reaches
this: a 64 px crop shown at 64 px is too small for a person or a model to judge outlines on."""

OUTLINE_COLOURS = ((1.0, 0.25, 0.25), (0.2, 0.9, 1.0), (1.0, 0.9, 0.1), (0.4, 1.0, 0.3), (1.0, 0.4, 1.0))
"""One colour per label set (red, cyan, yellow, green, magenta): several sets stay apart."""

GROUP_COLOURS = ((0.2, 1.0, 0.2), (1.0, 0.2, 1.0), (0.2, 0.8, 1.0), (1.0, 0.85, 0.1), (1.0, 0.3, 0.3))
"""One colour per ``color_by`` group: the first group (``True`` for a boolean) green, the next magenta."""

_NAMES: dict[tuple[float, ...], str] = {
    (0.2, 1.0, 0.2): "green",
    (1.0, 0.2, 1.0): "magenta",
    (0.2, 0.8, 1.0): "blue",
    (1.0, 0.85, 0.1): "yellow",
    (1.0, 0.3, 0.3): "red",
    (1.0, 0.25, 0.25): "red",
    (0.2, 0.9, 1.0): "cyan",
    (1.0, 0.9, 0.1): "yellow",
    (0.4, 1.0, 0.3): "green",
    (1.0, 0.4, 1.0): "magenta",
}

MAX_PANELS = 12
"""A stack shown as a panel shows at most this many planes, evenly spaced."""


def show(
    image: Any,
    labels: Any = None,
    *,
    color_by: Any = None,
    title: str | None = None,
    titles: Any = None,
    max_side: int = 768,
    percentiles: tuple[float, float] = (1, 99.8),
) -> None:
    """Show an image to the agent and the notebook as one PNG, with outlines, colours and a title.

    A small image is enlarged (nearest neighbour) to at least 512 px, a big one downsampled to
    ``max_side`` (a dask or zarr array is read only at that resolution). Each plane is stretched
    between the given ``percentiles`` of its values (``(1, 60)`` shows an uneven background).
    Outlines are drawn at screen resolution in a colour with a dark seam beside it, so they show
    on bright and dark objects alike.

    Args:
        image: a 2-D plane, an RGB image (channels last), a 3-D stack (C, Y, X) or (T, Y, X)
            shown as a panel of its planes side by side, or a list of 2-D planes (a panel).
        labels: an integer label image of the plane's shape (0 = background), or a list of them
            (each set in its own colour: red, cyan, yellow, ...).
        color_by: one value per label to colour the outlines by group, e.g. a boolean
            ``positive``: a dict {label: value}, or a sequence in the order of the sorted labels
            present (regionprops order), or indexed by label id (length max label + 1).
            ``True`` is green, ``False`` magenta; the title says which colour is which.
        title: a line drawn above the image.
        titles: one caption per panel (default: the plane's index).
        max_side: the longest side of one plane on screen.
        percentiles: the stretch, in percentiles of each plane's values.
    """
    import numpy as np
    from IPython.core.display import Image
    from IPython.display import display

    planes, captions = _planes(image, titles)
    label_sets = [] if labels is None else list(labels) if isinstance(labels, (list, tuple)) else [labels]
    if color_by is not None and len(label_sets) != 1:
        raise ValueError("color_by needs exactly one label image: show(image, labels, color_by=positive)")
    groups = _groups(label_sets[0], color_by) if color_by is not None else None
    longest = max(max(np.shape(p)[:2]) for p in planes)
    side = min(max_side, max(256, (3 * max_side) // len(planes))) if len(planes) > 1 else max_side
    tiles = [_render(p, label_sets, groups, longest, side, percentiles) for p in planes]
    legend = ""
    if groups is not None:
        legend = ", ".join(f"{_NAMES.get(c, str(c))}: {v!r} ({n})" for v, c, n in groups[2])
    canvas = _compose(tiles, captions if len(planes) > 1 else None, " | ".join(t for t in (title, legend) if t))
    display(Image(data=canvas))


def _planes(image: Any, titles: Any) -> tuple[list[Any], list[str]]:
    """The planes to draw (each 2-D, or RGB channels last) and their captions."""
    import numpy as np

    if isinstance(image, (list, tuple)):
        planes = list(image)
    else:
        shape = tuple(getattr(image, "shape", np.shape(image)))
        rgb = len(shape) == 3 and shape[-1] in (3, 4) and shape[0] > 4
        if len(shape) == 2 or rgb:
            planes = [image]
        elif len(shape) == 3:
            pick = np.unique(np.linspace(0, shape[0] - 1, min(shape[0], MAX_PANELS)).round().astype(int))
            planes = [image[int(i)] for i in pick]
            titles = titles if titles is not None else [str(int(i)) for i in pick]
        else:
            raise ValueError(
                f"show() takes a 2-D image, an RGB one (channels last), a 3-D stack (a panel of its "
                f"planes) or a list of planes, not shape {shape}; pick the axes first: show(stack.max(axis=0))"
            )
    for p in planes:
        s = tuple(getattr(p, "shape", np.shape(p)))
        if not (len(s) == 2 or (len(s) == 3 and s[-1] in (3, 4))):
            raise ValueError(f"every plane of a panel must be 2-D (or RGB), got shape {s}")
    captions = [str(t) for t in titles] if titles is not None else [str(i) for i in range(len(planes))]
    if len(captions) != len(planes):
        raise ValueError(f"titles has {len(captions)} entries for {len(planes)} panels")
    return planes, captions


def _groups(labels: Any, color_by: Any) -> tuple[Any, Any, list[tuple[Any, tuple[float, float, float], int]]]:
    """(label ids, colour per id, legend rows) for ``color_by``."""
    import numpy as np

    lab = np.asarray(labels)
    present = np.unique(lab)
    present = present[present != 0]
    if isinstance(color_by, dict):
        values = {int(k): v.item() if hasattr(v, "item") else v for k, v in color_by.items()}
    else:
        seq = list(np.asarray(color_by).tolist())
        if len(seq) == len(present):
            values = dict(zip((int(v) for v in present), seq, strict=True))
        elif len(seq) == int(lab.max(initial=0)) + 1:
            values = {int(v): seq[int(v)] for v in present}
        else:
            raise ValueError(
                f"color_by has {len(seq)} values; give one per label present ({len(present)}, in sorted "
                f"label order), one per label id ({int(lab.max(initial=0)) + 1}, index = label) or a dict"
            )
    order = sorted({v for v in values.values()}, key=lambda v: (not (v is True or v == 1), str(v)))
    if len(order) > len(GROUP_COLOURS):
        raise ValueError(f"color_by has {len(order)} distinct values; at most {len(GROUP_COLOURS)} can be told apart")
    colour_of = {v: GROUP_COLOURS[i] for i, v in enumerate(order)}
    ids = np.asarray(sorted(values), dtype=np.int64)
    colours = np.asarray([colour_of[values[i]] for i in ids], dtype=np.float64)
    legend = [(v, colour_of[v], sum(1 for x in values.values() if x == v)) for v in order]
    return ids, colours, legend


def _render(
    plane: Any, label_sets: list[Any], groups: Any, longest: int, side: int, percentiles: tuple[float, float]
) -> Any:
    """One plane as an RGB uint8 array at screen size, with its outlines."""
    import numpy as np

    shape = tuple(getattr(plane, "shape", np.shape(plane)))
    step = max(1, -(-max(shape[:2]) // side))
    up = max(1, min(MIN_SIDE, side) // max(1, -(-longest // step))) if longest < MIN_SIDE else 1
    img = np.asarray(plane[::step, ::step], dtype=np.float64)
    finite = img[np.isfinite(img)]
    lo, hi = np.percentile(finite, percentiles) if finite.size else (0.0, 0.0)
    img = np.clip((np.nan_to_num(img, nan=lo) - lo) / (hi - lo), 0.0, 1.0) if hi > lo else np.zeros_like(img)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    img = img[..., :3]
    small = img.shape[:2]
    if up > 1:
        img = img.repeat(up, axis=0).repeat(up, axis=1)
    for k, labels in enumerate(label_sets):
        lab = np.asarray(labels[::step, ::step])
        if lab.shape != small:
            raise ValueError(f"labels of shape {np.shape(labels)} do not match the image's {shape[:2]}")
        if up > 1:
            lab = lab.repeat(up, axis=0).repeat(up, axis=1)
        edge = _edges(lab, thick=up >= 3)
        seam = _grow(edge) & ~edge
        img[seam] *= 0.2
        if groups is None:
            img[edge] = OUTLINE_COLOURS[k % len(OUTLINE_COLOURS)]
        else:
            ids, colours, _ = groups
            where = np.searchsorted(ids, lab[edge]).clip(0, len(ids) - 1)
            known = ids[where] == lab[edge]
            paint = np.where(known[:, None], colours[where], (0.8, 0.8, 0.8))
            img[edge] = paint
    return (img * 255).round().astype(np.uint8)


def _edges(lab: Any, thick: bool) -> Any:
    """Pixels of an object next to another value (its inner boundary); two pixels wide if thick."""
    import numpy as np

    edge = np.zeros(lab.shape, dtype=bool)
    diff_y = lab[1:, :] != lab[:-1, :]
    diff_x = lab[:, 1:] != lab[:, :-1]
    edge[1:, :] |= diff_y
    edge[:-1, :] |= diff_y
    edge[:, 1:] |= diff_x
    edge[:, :-1] |= diff_x
    edge[0, :] = edge[-1, :] = True
    edge[:, 0] = edge[:, -1] = True
    edge &= lab != 0
    if thick:
        inner = _grow(edge) & (lab != 0)
        # grow inward only: the seam stays outside the object
        edge = inner & ~_grow(lab == 0) | edge
    return edge


def _grow(mask: Any) -> Any:
    """A boolean mask grown by one pixel (8 neighbours)."""

    out = mask.copy()
    out[1:, :] |= mask[:-1, :]
    out[:-1, :] |= mask[1:, :]
    out[:, 1:] |= out[:, :-1].copy()
    out[:, :-1] |= out[:, 1:].copy()
    return out


def _compose(tiles: list[Any], captions: list[str] | None, title: str) -> bytes:
    """The tiles side by side on a dark canvas, with captions and a title above; PNG bytes."""
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    try:
        font: Any = ImageFont.load_default(size=16)
    except (TypeError, OSError, AttributeError):  # Pillow before 10.1, or no FreeType
        font = ImageFont.load_default()
    gap, line = 8, 22
    top = (line if title else 0) + (line if captions else 0)
    width = sum(t.shape[1] for t in tiles) + gap * (len(tiles) - 1)
    height = max(t.shape[0] for t in tiles) + top
    canvas = PILImage.new("RGB", (width, height), (24, 24, 24))
    draw = ImageDraw.Draw(canvas)
    if title:
        draw.text((4, 3), title, fill=(255, 255, 255), font=font)
    x = 0
    for i, tile in enumerate(tiles):
        canvas.paste(PILImage.fromarray(tile), (x, top))
        if captions:
            draw.text((x + 4, top - line + 3), captions[i], fill=(220, 220, 220), font=font)
        x += tile.shape[1] + gap
    buf = io.BytesIO()
    canvas.save(buf, format="PNG")
    return buf.getvalue()
