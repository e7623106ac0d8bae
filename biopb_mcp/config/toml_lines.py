"""Where each key of a TOML document is written: tomllib parses values but reports no positions.

The config loader validates values after tomllib has parsed them, so to name the line of a bad
value it scans the text itself. The scanner follows TOML's structure (table headers, dotted and
quoted keys, inline tables) and skips strings, arrays and comments whole, so text inside a
multi-line string or array is never taken for a key.
"""

from __future__ import annotations

import string
import tomllib

__all__ = ["key_lines", "leading_key"]

_BARE_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
_SCALAR_END = frozenset(",]}#\r\n")


class _Malformed(Exception):
    """The text stops following TOML; the scan keeps what it found up to there."""


def key_lines(text: str) -> dict[str, int]:
    """Dotted key path -> 1-based line where it is first written.

    A table maps to its header line; a key to its own line, also inside an inline table; each
    leading part of a dotted key (``kernel`` of a top-level ``kernel.name = ...``) to the first
    line that writes under it. Meant for text tomllib has accepted; on other text it returns
    what it found before the first thing it cannot follow.
    """
    scanner = _Scanner(text)
    try:
        scanner.document()
    except _Malformed:
        pass
    return scanner.found


def leading_key(line: str) -> str | None:
    """The key a single line assigns to (``a.b`` for ``a . "b" = 1``), or None if it assigns none.

    For naming the key on a line tomllib refused: the key part may be fine when the value is not.
    """
    scanner = _Scanner(line)
    try:
        scanner.skip_spaces()
        if scanner.peek() in ("", "[", "#"):
            return None
        parts = scanner.key()
        scanner.expect("=")
    except _Malformed:
        return None
    return ".".join(parts)


class _Scanner:
    """One pass over the text, counting lines as it consumes characters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.found: dict[str, int] = {}

    # --- characters ---------------------------------------------------------------------------

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def at(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def advance(self, count: int = 1) -> None:
        if self.pos + count > len(self.text):
            raise _Malformed
        self.line += self.text.count("\n", self.pos, self.pos + count)
        self.pos += count

    def expect(self, char: str) -> None:
        self.skip_spaces()
        if self.peek() != char:
            raise _Malformed
        self.advance()

    def skip_spaces(self) -> None:
        while self.peek() in (" ", "\t"):
            self.advance()

    def skip_blank(self) -> None:
        """Spaces, newlines and comments: what may stand between statements or array items."""
        while (c := self.peek()) and c in " \t\r\n#":
            if c == "#":
                end = self.text.find("\n", self.pos)
                self.advance((len(self.text) if end < 0 else end) - self.pos)
            else:
                self.advance()

    # --- structure ----------------------------------------------------------------------------

    def document(self) -> None:
        table: tuple[str, ...] = ()
        while True:
            self.skip_blank()
            if not self.peek():
                return
            line = self.line
            if self.peek() == "[":
                brackets = 2 if self.at("[[") else 1
                self.advance(brackets)
                table = self.key()
                for _ in range(brackets):
                    self.expect("]")
                self.note(table, line)
            else:
                path = table + self.key()
                self.expect("=")
                self.note(path, line)
                self.value(path)

    def note(self, path: tuple[str, ...], line: int) -> None:
        for end in range(1, len(path) + 1):
            self.found.setdefault(".".join(path[:end]), line)

    def key(self) -> tuple[str, ...]:
        parts: list[str] = []
        while True:
            self.skip_spaces()
            if self.peek() in ('"', "'"):
                start = self.pos
                raw = self.string()
                # a basic string's escapes decoded by tomllib itself, so the key reads as it parses
                parts.append(
                    tomllib.loads(f"k = {self.text[start : self.pos]}")["k"] if self.text[start] == '"' else raw
                )
            else:
                start = self.pos
                while self.peek() and self.peek() in _BARE_KEY_CHARS:
                    self.advance()
                if self.pos == start:
                    raise _Malformed
                parts.append(self.text[start : self.pos])
            self.skip_spaces()
            if self.peek() != ".":
                return tuple(parts)
            self.advance()

    def value(self, path: tuple[str, ...] | None) -> None:
        """Consume one value; keys inside an inline table are noted under ``path`` (None: not
        addressable, as inside an array)."""
        self.skip_spaces()
        c = self.peek()
        if c in ('"', "'"):
            self.string()
        elif c == "[":
            self.advance()
            while True:
                self.skip_blank()
                if self.peek() == "]":
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                self.value(None)
        elif c == "{":
            self.advance()
            while True:
                self.skip_blank()
                if self.peek() == "}":
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                line = self.line
                sub = self.key()
                self.expect("=")
                inner = None if path is None else path + sub
                if inner is not None:
                    self.note(inner, line)
                self.value(inner)
        else:  # number, boolean or date-time (which may hold one space)
            start = self.pos
            while self.peek() and self.peek() not in _SCALAR_END:
                self.advance()
            if self.pos == start:
                raise _Malformed

    def string(self) -> str:
        """Consume a string of any of TOML's four kinds; returns its raw text between the quotes."""
        quote = self.peek()
        if self.at(quote * 3):
            self.advance(3)
            start = self.pos
            while not self.at(quote * 3):
                self.advance(2 if quote == '"' and self.at("\\") else 1)
            run = 3
            while run < 5 and self.text.startswith(quote, self.pos + run):
                run += 1  # up to two quotes just before the closing three belong to the string
            end = self.pos + run - 3
            self.advance(run)
            return self.text[start:end]
        self.advance()
        start = self.pos
        while self.peek() != quote:
            if self.peek() in ("", "\n"):
                raise _Malformed
            self.advance(2 if quote == '"' and self.at("\\") else 1)
        end = self.pos
        self.advance()
        return self.text[start:end]
