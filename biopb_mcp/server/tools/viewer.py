"""The viewer tool: the agent sees the napari window the user sees, through the kernel.

Thin: it asks the kernel host for the viewer's facts (a silent query, answered busy while code
runs), saves the screenshot like every image, and fits the result under the client's limit.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from biopb_mcp.kernel import viewer
from biopb_mcp.kernel.rendering import image_factory
from biopb_mcp.server.result_size import encoded_size, fit_images, image_blocks, text_block
from biopb_mcp.server.state import AppState
from biopb_mcp.server.tool import READ_ONLY, tool
from biopb_mcp.text import kernel as kernel_text
from biopb_mcp.text import viewer as viewer_text

logger = logging.getLogger(__name__)

__all__ = ["register_viewer_tools"]

_NOTE_ROOM = 1024
"""Bytes kept for the note saying the screenshot was shrunk to fit the result."""

_shots = itertools.count(1)


def _image_stem() -> str:
    """A file stem no other screenshot of this or another server shares (same state dir)."""
    return f"viewer-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(_shots)}"


TEXT_SHARE = 0.5
"""Most of a result's bytes the text may take: the rest is the screenshot's, however the kernel
described the layers (the fields are shortened already; many layers with wide names could
still crowd the picture out)."""


def _fitted_text(text: str, budget: int, limit: int) -> str:
    """``text`` within ``budget`` bytes as sent: its longest head of whole lines, with a note."""
    if encoded_size(CallToolResult(content=[text_block(text)])) <= budget:
        return text
    lines = text.split("\n")
    note = viewer_text.text_cut_note(limit)

    def head(n: int) -> str:
        return "\n".join([*lines[:n], note])

    low, high = 0, len(lines)
    while low < high:
        mid = (low + high + 1) // 2
        if encoded_size(CallToolResult(content=[text_block(head(mid))])) <= budget:
            low = mid
        else:
            high = mid - 1
    return head(low)


def _result(text: str, png: bytes | None, limit: int) -> CallToolResult:
    """Text plus the screenshot, the whole under ``limit`` bytes as sent (the image shrunk or left out)."""
    text = _fitted_text(text, int(limit * TEXT_SHARE), limit)
    result = CallToolResult(content=[text_block(text)])
    if png is None:
        return result
    fitted = fit_images(encoded_size(result) + _NOTE_ROOM, [png], limit)
    if fitted.shrunk or fitted.dropped:
        text += "\n" + kernel_text.fitted_note(fitted.shrunk, fitted.dropped, 1, limit)
    result.content = [text_block(text), *image_blocks(fitted.images)]
    return result


def register_viewer_tools(mcp: MCPServer, state: AppState) -> None:
    host = state.kernel

    @tool(mcp, READ_ONLY, description=viewer_text.LOOK_DESCRIPTION)
    def look_at_viewer(whole_window: bool = False) -> CallToolResult:
        """The napari viewer in the kernel: its screenshot (saved and attached) and its layers."""
        answer = host.probes.query(viewer.look_expression(canvas_only=not whole_window), what="the viewer query")
        look = viewer.parse_look(answer)
        placeholder, attached = "", None
        if look.png is not None:
            ks = state.settings.kernel
            image_dir = Path(state.settings.state_dir) / "images"
            record, placeholder = image_factory(look.png, _image_stem(), ks.max_image_bytes, image_dir)(1, 0)
            attached = record.data
        return _result(viewer_text.look_text(look, placeholder), attached, state.settings.kernel.max_result_bytes)
