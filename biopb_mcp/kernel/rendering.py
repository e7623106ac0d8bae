"""Turning executions into bounded text + images.

Bounds exist because MCP clients drop oversized tool results: text is cut at
``max_output_chars`` (the page says where the rest starts), and an image over
``max_image_bytes`` is downscaled (when Pillow happens to be importable) or saved to a file
whose path is shown instead of the pixels.
"""

from __future__ import annotations

import binascii
import io
import json
import logging
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from biopb_mcp.kernel import image_files
from biopb_mcp.kernel.executions import Execution, ImageRecord, Rendered
from biopb_mcp.kernel.states import ExecutionStatus

logger = logging.getLogger(__name__)

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk, or None when the bytes are not a PNG."""
    if len(data) >= 24 and data.startswith(_PNG_SIGNATURE) and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    return None


def downscale_png(data: bytes | Path, max_bytes: int) -> bytes | None:
    """Shrink a PNG (bytes, or a file) under ``max_bytes`` with Pillow when available; None otherwise."""
    try:
        from PIL import Image  # optional: not a dependency of biopb-mcp
    except ImportError:
        return None
    try:
        with Image.open(data if isinstance(data, Path) else io.BytesIO(data)) as img:
            img.load()
            scale = 0.7
            while scale > 0.02:
                w, h = max(1, int(img.width * scale)), max(1, int(img.height * scale))
                buf = io.BytesIO()
                img.resize((w, h)).save(buf, format="PNG", optimize=True)
                if buf.tell() <= max_bytes:
                    return buf.getvalue()
                scale *= 0.7
    except Exception:  # a corrupt image is saved to a file instead
        logger.warning("could not downscale an image", exc_info=True)
    return None


IN_MEMORY_IMAGE_BYTES = 16 * 1024 * 1024
"""A PNG display bigger than this (decoded) is decoded piece by piece straight into its file and
downscaled from there: never whole in memory beside its base64 text."""

_B64_CHUNK = 4 * 1024 * 1024
"""Base64 characters decoded at a time (a multiple of 4)."""


def b64_chunks(text: str | memoryview) -> Iterator[bytes]:
    """The bytes of base64 ``text``, a piece at a time (whitespace inside is not expected: Jupyter
    sends one line)."""
    for start in range(0, len(text), _B64_CHUNK):
        yield binascii.a2b_base64(text[start : start + _B64_CHUNK])


def image_factory(
    data: bytes | Path, job_id: str, max_bytes: int, image_dir: Path, *, max_images: int | None = None
) -> Callable[[int, int], tuple[ImageRecord, str]]:
    """Build the callback ``Execution.add_image`` uses to record one PNG and its placeholder.

    Every image is saved to a file named in its placeholder, attached or not: a host that shows
    the model only text still lets it reach the picture, and one cut from a result to fit a
    client's limit is never lost. ``max_images`` set means the execution already holds that many
    inline images: this one is saved only, so neither a result nor the server's memory grows
    with the count. ``data`` given as a path is an image saved already (a big one, decoded
    straight into its file): it is attached downscaled from there.
    """

    def make(index: int, offset: int) -> tuple[ImageRecord, str]:
        if isinstance(data, Path):
            path: Path | None = data
            with open(data, "rb") as fh:
                head = fh.read(24)
            nbytes, size = data.stat().st_size, png_size(head)
            saved = f"saved to {data}"
        else:
            nbytes, size = len(data), png_size(data)
            try:
                path = image_files.for_dir(image_dir).save(f"{job_id}-image{index}.png", data)
                saved = f"saved to {path}"
            except OSError as exc:
                path, saved = None, f"could not be saved ({exc})"
        dims = f"{size[0]}x{size[1]} " if size else ""
        record = ImageRecord(index=index, nbytes=nbytes, offset=offset, size=size, path=path)
        if max_images is not None:
            return record, (
                f"[image {index}: {dims}PNG, {nbytes} bytes; not attached (max_images={max_images} "
                f"per execution reached); full size {saved}]"
            )
        if nbytes <= max_bytes:
            record.data = data if isinstance(data, bytes) else data.read_bytes()
            return record, f"[image {index}: {dims}PNG, {nbytes} bytes, attached; {saved}]"
        small = downscale_png(data, max_bytes)
        if small is not None:
            record.data = small
            small_size = png_size(small)
            sdims = f"{small_size[0]}x{small_size[1]}" if small_size else "smaller"
            return record, (
                f"[image {index}: {dims}PNG, {nbytes} bytes > max_image_bytes={max_bytes}; "
                f"attached downscaled to {sdims}; full size {saved}]"
            )
        return record, (
            f"[image {index}: {dims}PNG, {nbytes} bytes > max_image_bytes={max_bytes}; not attached; full size {saved}]"
        )

    return make


TAIL_SHARE = 0.5
"""Share of a first page given to the output's end when it does not fit whole: the summary or
the error a long run ends with is shown with its start, and the middle is paged."""


def render(ex: Execution, offset: int, max_chars: int, *, header: bool) -> Rendered:
    """One page of an execution's transcript, at most ``max_chars`` of output, with its facts.

    The first page (``offset`` 0) of output longer than ``max_chars`` shows its head and its
    tail; ``next_offset`` then points at the middle, where paging continues.

    Args:
        ex: the execution.
        offset: first transcript character to show (0 = start).
        max_chars: page size (``kernel.max_output_chars``).
        header: ask for a status line; always on for unfinished, dead or aborted executions,
            and for any page but the first.
    """
    if offset < 0:
        raise ValueError("offset must be >= 0")
    text, dropped, images = ex.snapshot()
    status = ex.status
    total = len(text)
    start = min(offset, total)
    end = min(total, start + max_chars)
    tail_start = total
    if offset == 0 and end < total:
        tail_len = int(max_chars * TAIL_SHARE)
        end = max_chars - tail_len
        tail_start = total - tail_len
        newline = text.find("\n", tail_start, min(total, tail_start + 200))
        if 0 <= newline < total - 1:  # the tail starts at a line's start when one is near
            tail_start = newline + 1
    page = text[start:end]
    tail = text[tail_start:]
    running = status == ExecutionStatus.RUNNING
    next_offset = end if end < total or running else None
    shown = [
        img.data
        for img in images
        if img.data is not None and (start <= img.offset < max(end, start + 1) or img.offset >= tail_start)
    ]
    overflow = ex.overflow
    finished_end = (tail_start < total or end == total) and not running
    return Rendered(
        # Pages are exact slices (only the very end of a finished execution loses its newline),
        # so they concatenate: a running job's page may be followed by more of the same line.
        output=page.rstrip("\n") if end == total and not running else page,
        tail=tail.rstrip("\n") if finished_end else tail,
        tail_offset=tail_start,
        images=shown,
        job_id=ex.job_id,
        status=status,
        offset=start,
        end=end,
        requested_offset=offset,
        next_offset=next_offset,
        total_chars=total,
        header=header
        or status in (ExecutionStatus.RUNNING, ExecutionStatus.DEAD, ExecutionStatus.ABORTED)
        or offset > 0,
        elapsed=ex.elapsed(),
        dropped=dropped,
        overflow_path=overflow.path if overflow is not None and overflow.chars else None,
        overflow_lost=overflow.lost if overflow is not None else dropped,
        open_line=ex.open_line() if running and (end == total or tail_start < total) and not dropped else "",
        note=ex.note,
        kernel_lost=ex.kernel_lost,
        ending=ex.ending,
    )


def parse_expression_json(text_plain: str) -> Any:
    """Decode a user_expression whose value is a JSON string (text/plain holds its repr)."""
    import ast

    return json.loads(ast.literal_eval(text_plain))
