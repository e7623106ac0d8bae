"""Keeping a tool result under the size a client accepts, whole.

An MCP client drops a message over its limit entirely, text included (the Python SDK's HTTP
client refuses a server-sent event over 1 MiB), so the per-image cap alone does not protect a
result: one large figure, base64-encoded (4/3) beside its text, can pass it. The result is
measured as it will be sent, and images are shrunk (or left out; every image is also saved to a
file its placeholder names) until the whole fits ``kernel.max_result_bytes``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent

from biopb_mcp.kernel.rendering import downscale_png, png_size

__all__ = [
    "ENVELOPE_BYTES",
    "NOTE_ROOM",
    "Fitted",
    "TextPage",
    "encoded_size",
    "fit_images",
    "image_blocks",
    "json_size",
    "text_block",
    "text_page",
    "text_pages",
]

ENVELOPE_BYTES = 512
"""Room for what wraps a result on the wire: the JSON-RPC envelope, its id, an SSE event's framing."""

_IMAGE_BLOCK = len('{"type":"image","data":"","mimeType":"image/png"},')
"""Bytes an image block adds besides its base64 data."""


def encoded_size(result: CallToolResult) -> int:
    """Bytes of the result as JSON on the wire, with room for its envelope."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8")) + ENVELOPE_BYTES


def _b64_len(n: int) -> int:
    return 4 * ((n + 2) // 3)


@dataclass
class Fitted:
    """Images that fit, and what was done to the others (for the note the agent reads)."""

    images: list[bytes]
    shrunk: list[tuple[int, tuple[int, int] | None]] = field(default_factory=list)
    """(1-based position in this result, new size) of each image downscaled to fit."""
    dropped: list[int] = field(default_factory=list)
    """1-based positions of images left out."""


def fit_images(text_bytes: int, images: list[bytes], limit: int) -> Fitted:
    """Shrink or drop images so that ``text_bytes`` (the rest of the result, encoded) plus the
    images stays within ``limit``.

    The budget is shared out smallest first: an image under its fair share keeps its bytes and
    leaves the rest to the larger ones, which are downscaled to their share (with Pillow, when
    the kernel's environment has it) or, failing that, left out.
    """
    budget = limit - text_bytes
    if sum(_b64_len(len(png)) + _IMAGE_BLOCK for png in images) <= budget:
        return Fitted(list(images))
    fitted = Fitted([])
    kept: dict[int, bytes] = {}
    remaining = max(budget, 0)
    order = sorted(range(len(images)), key=lambda i: len(images[i]))
    for rank, i in enumerate(order):
        share = remaining // (len(order) - rank)
        png = images[i]
        if _b64_len(len(png)) + _IMAGE_BLOCK <= share:
            kept[i] = png
        else:
            raw_budget = (share - _IMAGE_BLOCK) * 3 // 4 - 3
            small = downscale_png(png, raw_budget) if raw_budget > 1024 else None
            if small is None:
                fitted.dropped.append(i + 1)
                continue
            kept[i] = small
            fitted.shrunk.append((i + 1, png_size(small)))
        remaining -= _b64_len(len(kept[i])) + _IMAGE_BLOCK
    fitted.images = [kept[i] for i in sorted(kept)]
    fitted.shrunk.sort()
    return fitted


def image_blocks(images: list[bytes]) -> list[ContentBlock]:
    """PNG bytes as MCP image content."""
    return [
        ImageContent(type="image", data=base64.b64encode(png).decode("ascii"), mime_type="image/png") for png in images
    ]


def text_block(text: str) -> TextContent:
    return TextContent(type="text", text=text)


NOTE_ROOM = 1024
"""Bytes kept free in a cut answer for the note that says how to read the rest."""


def json_size(text: str) -> int:
    """Bytes ``text`` takes as a JSON string on the wire (escapes included, quotes not)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


@dataclass(frozen=True)
class TextPage:
    """One page of a text cut to fit an answer: its text and where it sits in the whole."""

    text: str
    number: int
    """1-based."""
    count: int
    """How many pages the whole text makes at this size."""
    first_line: int
    """1-based line of the whole text this page starts in."""
    last_line: int
    total_lines: int


def _chunk_end(line: str, start: int, budget: int) -> int:
    """The largest end such that ``line[start:end]`` fits ``budget`` (at least one character)."""
    lo, hi = start + 1, len(line)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if json_size(line[start:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def text_pages(text: str, budget: int) -> list[tuple[int, int, int, int]]:
    """(start, end, first line, last line) of each page of ``text`` that fits ``budget`` bytes
    as JSON: whole lines where they fit, a longer line in pieces. The same text and budget
    always make the same pages, so page N of one answer continues page N-1 of another."""
    pages: list[tuple[int, int, int, int]] = []
    start = size = pos = 0
    first = 1
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        line_size = json_size(line)
        if size and size + line_size > budget:
            pages.append((start, pos, first, number - 1))
            start, size, first = pos, 0, number
        if line_size > budget:  # alone too big: pieces of it, each a page
            at = 0
            while json_size(line[at:]) > budget:
                end = _chunk_end(line, at, budget)
                pages.append((pos + at, pos + end, number, number))
                at = end
            start, size, first = pos + at, json_size(line[at:]), number
        else:
            size += line_size
        pos += len(line)
    if size or not pages:
        pages.append((start, len(text), first, max(first, text.count("\n") + (0 if text.endswith("\n") else 1))))
    return pages


def text_page(text: str, budget: int, number: int = 1) -> TextPage | None:
    """Page ``number`` of ``text`` at ``budget`` bytes, or None when there is no such page."""
    pages = text_pages(text, budget) if json_size(text) > budget else [(0, len(text), 1, 0)]
    if not 1 <= number <= len(pages):
        return None
    start, end, first, last = pages[number - 1]
    total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return TextPage(text[start:end], number, len(pages), first, last or total, total)
