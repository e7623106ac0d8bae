"""A terminal's screen drawn as a PNG: what a person at that terminal sees, text and colours.

The screen is pyte's emulation of the terminal the program ran in (see ``pty_console``); each
cell is drawn at its column in a monospace font, so a picture can only show what the emulated
terminal holds, and the part below the last line of text (an empty terminal) is left out.
"""

from __future__ import annotations

from pathlib import Path

import pyte
from PIL import Image, ImageDraw, ImageFont

BACKGROUND = (30, 30, 30)
FOREGROUND = (212, 212, 212)
CURSOR = (190, 190, 190)
PALETTE = {  # a common dark terminal theme (VS Code's)
    "black": (0, 0, 0),
    "red": (205, 49, 49),
    "green": (13, 188, 121),
    "brown": (229, 229, 16),
    "blue": (36, 114, 200),
    "magenta": (188, 63, 188),
    "cyan": (17, 168, 205),
    "white": (229, 229, 229),
    "brightblack": (102, 102, 102),
    "brightred": (241, 76, 76),
    "brightgreen": (35, 209, 139),
    "brightbrown": (245, 245, 67),
    "brightblue": (59, 142, 234),
    "brightmagenta": (214, 112, 214),
    "brightcyan": (41, 184, 219),
    "brightwhite": (229, 229, 229),
}
FONTS = ("DejaVuSansMono.ttf", "LiberationMono-Regular.ttf")
"""Tried in order (Pillow searches the system's font folders); Pillow's own font otherwise."""
FONT_SIZE = 15
PADDING = 12
MIN_COLUMNS = 80
"""A picture is at least this wide, as a terminal is, however short its lines."""


def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for name in FONTS:
        try:
            return ImageFont.truetype(name, FONT_SIZE)
        except OSError:
            continue
    return ImageFont.load_default(FONT_SIZE)


def _colour(name: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
    if name == "default":
        return default
    if name in PALETTE:
        return PALETTE[name]
    try:  # 256-colour and true-colour cells carry their colour as hex
        return int(name[0:2], 16), int(name[2:4], 16), int(name[4:6], 16)
    except ValueError:
        return default


def used_area(screen: pyte.Screen) -> tuple[int, int]:
    """(rows, columns) from the top left that hold text or the cursor, the columns at least ``MIN_COLUMNS``."""
    lines = [line.rstrip() for line in screen.display]
    rows = max([i + 1 for i, line in enumerate(lines) if line] + [screen.cursor.y + 1])
    columns = max([len(line) for line in lines[:rows]] + [screen.cursor.x + 1])
    return rows, min(screen.columns, max(columns + 1, MIN_COLUMNS))


def cell_size() -> tuple[int, int]:
    """Width and height in pixels of one character cell."""
    font = _font()
    _, top, _, bottom = font.getbbox("Mg")
    return round(font.getlength("M")), round((bottom - top) * 1.35)


def draw(screen: pyte.Screen, path: Path) -> tuple[int, int]:
    """Write the screen's used area (``used_area``) to ``path`` as a PNG; returns that (rows, columns)."""
    rows, columns = used_area(screen)
    font = _font()
    width, height = cell_size()
    picture = Image.new("RGB", (2 * PADDING + columns * width, 2 * PADDING + rows * height), BACKGROUND)
    pen = ImageDraw.Draw(picture)
    for y in range(rows):
        line = screen.buffer[y]
        for x in range(columns):
            char = line[x]
            fg = _colour(char.fg, FOREGROUND)
            bg = _colour(char.bg, BACKGROUND)
            if char.reverse:
                fg, bg = bg, fg
            if char.bold and char.fg in PALETTE and not char.fg.startswith("bright"):
                fg = PALETTE["bright" + char.fg]  # as xterm shows bold in the basic colours
            left, top = PADDING + x * width, PADDING + y * height
            if (x, y) == (screen.cursor.x, screen.cursor.y) and not screen.cursor.hidden:
                fg, bg = BACKGROUND, CURSOR
            if bg != BACKGROUND:
                pen.rectangle((left, top, left + width - 1, top + height - 1), fill=bg)
            if char.data.strip():
                pen.text((left, top + height // 2), char.data, font=font, fill=fg, anchor="lm")
    picture.save(path, format="PNG", optimize=True)
    return rows, columns


def inked_rows(path: Path, rows: int) -> list[bool]:
    """For each of ``rows`` character rows of a picture ``draw`` wrote: whether anything is drawn on it."""
    with Image.open(path) as picture:
        pixels = picture.convert("RGB")
        _, height = cell_size()
        inked = []
        for y in range(rows):
            top, bottom = PADDING + y * height, PADDING + (y + 1) * height
            band = pixels.crop((0, top, pixels.width, bottom)) if bottom <= pixels.height else None
            inked.append(band is not None and any(colour != BACKGROUND for _, colour in band.getcolors(1 << 24) or []))
        return inked
