"""The server's side of the napari viewer in the kernel: the query that looks at it, and its facts.

The viewer itself lives in the kernel (``inside/viewer.py``); this module builds the silent
expression that asks the kernel for a screenshot and the layer list, and turns the answer into
facts. The expression carries the plugin's source, so it works in a joined kernel where the
plugins were not loaded (``kernel.existing_plugins = false``), finding the user's own viewer.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

from biopb_mcp.kernel.inside import INSIDE_DIR

__all__ = [
    "PLUGIN_FILE",
    "LayerFacts",
    "ViewerLook",
    "ViewerState",
    "look_expression",
    "parse_look",
    "wake_expression",
]

PLUGIN_FILE = INSIDE_DIR / "viewer.py"
"""Loaded by the kernel bootstrap as a built-in plugin (it defines ``viewer``)."""


class ViewerState(StrEnum):
    """What the kernel found."""

    OPEN = "open"
    """A viewer is open: screenshot and layers."""
    NO_VIEWER = "no_viewer"
    """No napari window is open in the kernel."""
    ERROR = "error"
    """A viewer is open but the screenshot failed, or the kernel's answer was unreadable."""


@dataclass(frozen=True)
class LayerFacts:
    """One layer as the kernel described it; fields that do not apply to its type are None."""

    name: str
    type: str
    visible: bool
    selected: bool = False
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    contrast_limits: tuple[float, float] | None = None
    colormap: str | None = None
    labels: int | None = None
    """Distinct non-zero labels (labels layers in memory and not too big; else None)."""
    count: int | None = None
    """Points or shapes in the layer."""
    shape_types: dict[str, int] | None = None
    levels: int | None = None
    """Pyramid levels of a multiscale layer."""
    array_type: str | None = None
    """The data's type when it is not a numpy array (dask, zarr): read lazily."""


@dataclass(frozen=True)
class ViewerLook:
    """The kernel's answer to look_at_viewer, as facts."""

    state: ViewerState
    png: bytes | None = None
    layers: list[LayerFacts] = field(default_factory=list)
    title: str = ""
    canvas_only: bool = True
    opened_by: str = ""
    """``viewer()`` (the plugin's) or ``napari`` (the user's own, found by napari.current_viewer())."""
    sliders: list[tuple[int, str, int, int]] = field(default_factory=list)
    """(axis, its label, current index, number of steps) of the axes not on screen."""
    ndisplay: int = 2
    error: str = ""
    napari_problem: str | None = None
    display_problem: str | None = None
    viewer_function: bool = False
    """The kernel's namespace has the plugin's ``viewer()``."""
    python: str = ""


@cache
def _plugin_source() -> str:
    return PLUGIN_FILE.read_text(encoding="utf-8")


def look_expression(*, canvas_only: bool) -> str:
    """A ``user_expressions`` entry yielding the viewer's facts as JSON (no names left behind).

    The plugin's source runs in a throwaway dict: its ``look_json`` uses the loaded plugin's
    viewer when there is one, else napari's current viewer.
    """
    globals_src = "{'__name__': 'biopb_mcp_viewer_look'}"
    return f"(lambda g: (exec({_plugin_source()!r}, g), g['look_json']({bool(canvas_only)!r}))[1])({globals_src})"


def wake_expression() -> str:
    """A ``user_expressions`` entry giving a joined kernel, which may lack the plugins, the
    plugin's Qt wake-up (its ``keep_answering``); yields JSON: whether it runs now.

    ipykernel idling in Qt's loop (napari in a notebook) can leave a request unread where no
    later message wakes it, so the nudges of ``Jobs.wait`` cannot help there.
    """
    globals_src = "{'__name__': 'biopb_mcp_viewer_wake'}"
    return f"(lambda g: (exec({_plugin_source()!r}, g), g['keep_answering']())[1])({globals_src})"


def _layer(raw: dict[str, Any]) -> LayerFacts:
    limits = raw.get("contrast_limits")
    shape = raw.get("shape")
    return LayerFacts(
        name=str(raw.get("name", "?")),
        type=str(raw.get("type", "?")),
        visible=bool(raw.get("visible", True)),
        selected=bool(raw.get("selected", False)),
        shape=tuple(int(n) for n in shape) if isinstance(shape, list) else None,
        dtype=raw.get("dtype"),
        contrast_limits=(float(limits[0]), float(limits[1])) if isinstance(limits, list) and len(limits) == 2 else None,
        colormap=raw.get("colormap"),
        labels=raw.get("labels"),
        count=raw.get("count"),
        shape_types=raw.get("shape_types"),
        levels=raw.get("levels"),
        array_type=raw.get("array_type"),
    )


def parse_look(answer: Any) -> ViewerLook:
    """The kernel's JSON answer as facts; an unreadable one is an ``error`` look saying so."""
    if not isinstance(answer, dict):
        return ViewerLook(ViewerState.ERROR, error="the kernel's answer was not readable")
    try:
        state = ViewerState(str(answer.get("state")))
    except ValueError:
        return ViewerLook(ViewerState.ERROR, error=f"unknown viewer state {answer.get('state')!r}")
    png: bytes | None = None
    if isinstance(answer.get("png"), str):
        try:
            png = base64.b64decode(answer["png"], validate=True)
        except (binascii.Error, ValueError):
            state, answer = ViewerState.ERROR, {**answer, "error": "the screenshot could not be decoded"}
    dims = answer.get("dims") if isinstance(answer.get("dims"), dict) else {}
    return ViewerLook(
        state=state,
        png=png,
        layers=[_layer(raw) for raw in answer.get("layers", []) if isinstance(raw, dict)],
        title=str(answer.get("title", "")),
        canvas_only=bool(answer.get("canvas_only", True)),
        opened_by=str(answer.get("opened_by", "")),
        sliders=[
            (int(s.get("axis", 0)), str(s.get("label", "")), int(s.get("at", 0)), int(s.get("of", 0)))
            for s in dims.get("sliders", [])
            if isinstance(s, dict)
        ],
        ndisplay=int(dims.get("ndisplay", 2)),
        error=str(answer.get("error", "")),
        napari_problem=answer.get("napari_problem"),
        display_problem=answer.get("display_problem"),
        viewer_function=bool(answer.get("viewer_function", False)),
        python=str(answer.get("python", "")),
    )
