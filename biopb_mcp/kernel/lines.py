"""Output lines as a terminal shows them: a carriage return moves back to the line's start.

Progress bars (tqdm and the like) redraw one line with ``\\r`` many times a second; shown as
text, every redraw would become a line of its own. ``LineEditor`` takes stream text in chunks
and gives back the finished lines, holding the line still being drawn until a newline ends it,
so only its last state is kept.
"""

from __future__ import annotations

import re

__all__ = ["MAX_OPEN_LINE", "LineEditor", "collapse"]

MAX_OPEN_LINE = 64 * 1024
"""Characters of a held line: past it the line is passed on as it is (a redrawn line must not
grow in memory without end); a later ``\\r`` then redraws only what follows."""

_CONTROL = re.compile(r"\r\n|[\r\n]")


class LineEditor:
    """The line being drawn, with the cursor where the next characters land.

    Only a line a carriage return touched is held back (it may be drawn again); any other text
    passes straight through, so plain output is never delayed.
    """

    def __init__(self) -> None:
        self.line = ""
        """The held line: one a carriage return touched, as it stands now."""
        self._col = 0
        self._redrawn = False
        self._settled = False

    def feed(self, text: str) -> str:
        """Take ``text``; return what is settled (text no carriage return can reach any more)."""
        if self._settled:
            self._settled = False
            if text.startswith(("\n", "\r\n")):  # the end of the line settle() ended already
                text = text[text.index("\n") + 1 :]
        if "\r" not in text and not self._redrawn:  # the common case: plain text
            return text
        done: list[str] = []
        pos = 0
        for match in _CONTROL.finditer(text):
            self._write(text[pos : match.start()])
            if match.group() == "\r":
                self._col, self._redrawn = 0, True
            else:
                done.append(self.line + "\n")
                self.line, self._col, self._redrawn = "", 0, False
            pos = match.end()
        self._write(text[pos:])
        if not self._redrawn:  # the last line saw no carriage return: nothing to hold
            done.append(self.flush())
        elif len(self.line) > MAX_OPEN_LINE:
            done.append(self.flush())
        return "".join(done)

    def settle(self) -> str:
        """The held line, ended because other output came (another stream, a display): with a
        newline, and the newline that then opens this stream's next text is taken as that same
        line's end (tqdm writes it when it closes, often after the program's next print)."""
        line = self.flush()
        if not line:
            return ""
        self._settled = True
        return line + "\n"

    def flush(self) -> str:
        """The held line as it stands (without a newline); the editor starts a new line."""
        line, self.line, self._col, self._redrawn = self.line, "", 0, False
        return line

    def _write(self, run: str) -> None:
        if run:
            self.line = self.line[: self._col] + run + self.line[self._col + len(run) :]
            self._col += len(run)


def collapse(text: str) -> str:
    """``text`` as a terminal would leave it: each line at the last state it was drawn in."""
    if "\r" not in text:
        return text
    editor = LineEditor()
    return editor.feed(text) + editor.flush()
