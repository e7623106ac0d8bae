"""What the agent reads about the napari viewer: the prose over the kernel's facts about it."""

from __future__ import annotations

from biopb_mcp.kernel.viewer import LayerFacts, ViewerLook, ViewerState

__all__ = ["LOOK_DESCRIPTION", "MAX_FIELD_CHARS", "MAX_LISTED_LAYERS", "look_text", "text_cut_note"]

MAX_LISTED_LAYERS = 60
"""Layers listed one per line; past this the rest are counted."""

MAX_FIELD_CHARS = 120
"""Characters shown of any text the kernel reports (a layer's name, the title, an error): a name
is the user's or the agent's free text, and a long one must not push the screenshot out."""

MAX_LISTED_AXES = 16
"""Axes listed of a layer's shape and of the sliders; past this the rest are counted."""

_NAME_NOTE = (
    "[names cut to {n} characters above; the full ones: execute_code {handle}.layers[i].name, or "
    "[layer.name for layer in {handle}.layers]]"
)

LOOK_DESCRIPTION = """\
See the napari viewer the user is looking at: a screenshot of its canvas (or of the whole
window, with whole_window=true) as an image, and its layers as text (name, type, shape,
visibility, contrast limits; for labels the number of labels, for points and shapes the count).
Use it whenever a viewer is open: to check a layer you added (a segmentation over its image), to
see what the user points at, and to see what the user drew or corrected after they say they are
done. This is better than drawing your own matplotlib overlay; without a viewer, show a PNG
(show(image, labels)). Open a viewer with execute_code: v = viewer() (it opens on the user's
screen), then v.add_image(img, name="raw"), v.add_labels(labels, name="nuclei"). Read what the
user drew with execute_code: v.layers["name"].data (points, shapes and labels are plain arrays).
Changes nothing. While code runs it answers busy (the viewer is frozen until the code ends).
read_doc("viewer") has the details."""
"""The tool's description (the model reads it when choosing a tool)."""


def _number(value: float) -> str:
    return f"{value:.4g}"


def _short(text: object) -> str:
    """``text`` at most ``MAX_FIELD_CHARS`` characters, a cut one saying how long it was."""
    text = str(text)
    if len(text) <= MAX_FIELD_CHARS:
        return text
    return f"{text[:MAX_FIELD_CHARS]}… ({len(text)} characters)"


def _dims(shape: tuple[int, ...]) -> str:
    shown = ", ".join(str(n) for n in shape[:MAX_LISTED_AXES])
    more = f", … {len(shape) - MAX_LISTED_AXES} more axes" if len(shape) > MAX_LISTED_AXES else ""
    return f"({shown}{more})"


def _axis_name(label: str) -> str:
    """`` (z)`` for a named axis; nothing for napari's default labels (-3, -2, -1)."""
    return "" if not label or label.lstrip("-").isdigit() else f" ({_short(label)})"


def _layer_line(layer: LayerFacts) -> str:
    parts = [_short(layer.type)]
    if layer.count is not None:
        noun = "point" if layer.type == "points" else "shape"
        counted = f"{layer.count} {noun}{'' if layer.count == 1 else 's'}"
        if layer.shape_types:
            kinds = sorted(layer.shape_types.items())
            counted += " (" + ", ".join(f"{_short(kind)} {n}" for kind, n in kinds[:MAX_LISTED_AXES]) + ")"
        parts.append(counted)
    if layer.shape is not None and layer.type != "points":
        parts.append(f"shape {_dims(layer.shape)}{' ' + _short(layer.dtype) if layer.dtype else ''}")
    if layer.levels is not None:
        parts.append(f"multiscale, {layer.levels} levels")
    if layer.array_type:
        parts.append(f"lazy ({_short(layer.array_type)})")
    parts.append("visible" if layer.visible else "hidden")
    if layer.contrast_limits is not None:
        low, high = layer.contrast_limits
        parts.append(f"contrast limits {_number(low)}–{_number(high)}")
    if layer.colormap:
        parts.append(f"colormap {_short(layer.colormap)}")
    if layer.type == "labels":
        parts.append(f"{layer.labels} labels" if layer.labels is not None else "labels not counted (large or lazy)")
    mark = " (selected)" if layer.selected else ""
    return f"- {_short(layer.name)}{mark}: " + ", ".join(parts)


def _layers_text(look: ViewerLook) -> list[str]:
    if not look.layers:
        return ["No layers yet."]
    lines = ["Layers, bottom to top:"]
    listed = look.layers[:MAX_LISTED_LAYERS]
    lines += [_layer_line(layer) for layer in listed]
    if len(look.layers) > MAX_LISTED_LAYERS:
        lines.append(f"… and {len(look.layers) - MAX_LISTED_LAYERS} more layers.")
    if any(len(layer.name) > MAX_FIELD_CHARS for layer in listed):
        lines.append(_NAME_NOTE.format(n=MAX_FIELD_CHARS, handle=_handle(look)))
    return lines


def _handle(look: ViewerLook) -> str:
    """How the agent's code reaches this viewer."""
    return "viewer()" if look.opened_by == "viewer()" or look.viewer_function else "napari.current_viewer()"


MAX_PROBLEM_CHARS = 2000
"""Characters shown of why napari or the display is missing (it carries an install line)."""


def _short_problem(text: str) -> str:
    return text if len(text) <= MAX_PROBLEM_CHARS else f"{text[:MAX_PROBLEM_CHARS]}… ({len(text)} characters)"


def _no_viewer(look: ViewerLook) -> str:
    if look.napari_problem:
        return f"No napari viewer is open: {_short_problem(look.napari_problem)}"
    if look.display_problem:
        return f"No napari viewer is open, and none can open here: {_short_problem(look.display_problem)}"
    if look.viewer_function:
        how = (
            "Open one with execute_code: v = viewer() (the window opens on the user's screen), add "
            'layers (v.add_image(img, name="raw"), v.add_labels(labels, name="nuclei")), then call '
            "look_at_viewer again."
        )
    else:
        how = (
            "This kernel has no viewer() helper (the user's own kernel, joined without biopb's plugins, "
            "or the name is taken), so open one with execute_code: %gui qt, then import napari; "
            "v = napari.current_viewer() or napari.Viewer(). Then call look_at_viewer again."
        )
    return f'No napari viewer is open in the kernel. {how} read_doc("viewer") has the details.'


def look_text(look: ViewerLook, placeholder: str = "") -> str:
    """The tool's text: what is shown, the image's placeholder line, the layers, how to read them.

    Args:
        look: the kernel's facts.
        placeholder: the saved image's line (size, where the file is), when there is a screenshot.
    """
    if look.state == ViewerState.NO_VIEWER:
        return _no_viewer(look)
    what = "the canvas" if look.canvas_only else "the whole window"
    lines = [
        f'napari viewer "{_short(look.title)}": {what} as the user sees it.'
        if look.state == ViewerState.OPEN
        else f"The napari viewer could not be shown: {_short_problem(look.error)}."
    ]
    if placeholder:
        lines.append(placeholder)
    if look.sliders:
        at = ", ".join(
            f"axis {axis}{_axis_name(label)} at {index} of {steps}"
            for axis, label, index, steps in look.sliders[:MAX_LISTED_AXES]
        )
        if len(look.sliders) > MAX_LISTED_AXES:
            at += f", … {len(look.sliders) - MAX_LISTED_AXES} more axes"
        lines.append(f"{look.ndisplay}-D view; sliders: {at}.")
    if look.state == ViewerState.OPEN or look.layers:
        lines += _layers_text(look)
        lines.append(
            f'Read a layer\'s data with execute_code: {_handle(look)}.layers["name"].data (points: an '
            "(N, D) array of coordinates; shapes: a list of vertex arrays; labels: an integer array)."
        )
    return "\n".join(lines)


def text_cut_note(limit: int) -> str:
    """Said when the layer list was cut to leave the screenshot its room in the result."""
    return (
        f"[the rest of this list was left out to keep the screenshot within kernel.max_result_bytes={limit} "
        "bytes; list the layers with execute_code: [(layer.name, type(layer).__name__) for layer in "
        "viewer().layers]]"
    )
