"""What the agent reads about the napari viewer: the prose over the kernel's facts about it."""

from __future__ import annotations

from biopb_mcp.kernel.viewer import LayerFacts, ViewerLook, ViewerState

__all__ = ["LOOK_DESCRIPTION", "MAX_LISTED_LAYERS", "look_text"]

MAX_LISTED_LAYERS = 60
"""Layers listed one per line; past this the rest are counted."""

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


def _axis_name(label: str) -> str:
    """`` (z)`` for a named axis; nothing for napari's default labels (-3, -2, -1)."""
    return "" if not label or label.lstrip("-").isdigit() else f" ({label})"


def _layer_line(layer: LayerFacts) -> str:
    parts = [layer.type]
    if layer.count is not None:
        noun = "point" if layer.type == "points" else "shape"
        counted = f"{layer.count} {noun}{'' if layer.count == 1 else 's'}"
        if layer.shape_types:
            counted += " (" + ", ".join(f"{kind} {n}" for kind, n in sorted(layer.shape_types.items())) + ")"
        parts.append(counted)
    if layer.shape is not None and layer.type != "points":
        dims = "(" + ", ".join(str(n) for n in layer.shape) + ")"
        parts.append(f"shape {dims}{' ' + layer.dtype if layer.dtype else ''}")
    if layer.levels is not None:
        parts.append(f"multiscale, {layer.levels} levels")
    if layer.array_type:
        parts.append(f"lazy ({layer.array_type})")
    parts.append("visible" if layer.visible else "hidden")
    if layer.contrast_limits is not None:
        low, high = layer.contrast_limits
        parts.append(f"contrast limits {_number(low)}–{_number(high)}")
    if layer.colormap:
        parts.append(f"colormap {layer.colormap}")
    if layer.type == "labels":
        parts.append(f"{layer.labels} labels" if layer.labels is not None else "labels not counted (large or lazy)")
    mark = " (selected)" if layer.selected else ""
    return f"- {layer.name}{mark}: " + ", ".join(parts)


def _layers_text(look: ViewerLook) -> list[str]:
    if not look.layers:
        return ["No layers yet."]
    lines = ["Layers, bottom to top:"]
    lines += [_layer_line(layer) for layer in look.layers[:MAX_LISTED_LAYERS]]
    if len(look.layers) > MAX_LISTED_LAYERS:
        lines.append(f"… and {len(look.layers) - MAX_LISTED_LAYERS} more layers.")
    return lines


def _handle(look: ViewerLook) -> str:
    """How the agent's code reaches this viewer."""
    return "viewer()" if look.opened_by == "viewer()" or look.viewer_function else "napari.current_viewer()"


def _no_viewer(look: ViewerLook) -> str:
    if look.napari_problem:
        return f"No napari viewer is open: {look.napari_problem}"
    if look.display_problem:
        return f"No napari viewer is open, and none can open here: {look.display_problem}"
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
        f'napari viewer "{look.title}": {what} as the user sees it.'
        if look.state == ViewerState.OPEN
        else f"The napari viewer could not be shown: {look.error}."
    ]
    if placeholder:
        lines.append(placeholder)
    if look.sliders:
        at = ", ".join(
            f"axis {axis}{_axis_name(label)} at {index} of {steps}" for axis, label, index, steps in look.sliders
        )
        lines.append(f"{look.ndisplay}-D view; sliders: {at}.")
    if look.state == ViewerState.OPEN or look.layers:
        lines += _layers_text(look)
        lines.append(
            f'Read a layer\'s data with execute_code: {_handle(look)}.layers["name"].data (points: an '
            "(N, D) array of coordinates; shapes: a list of vertex arrays; labels: an integer array)."
        )
    return "\n".join(lines)
