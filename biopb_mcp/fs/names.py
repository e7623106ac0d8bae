"""File names as text a client can carry, and back: the escape every name from disk is shown in.

A POSIX file name is bytes. One that is not valid UTF-8 (a Windows zip or an SMB share leaves
``Z\\xfcrich`` in Latin-1) reaches Python as a str holding a lone surrogate (``\\udcfc``), which no
UTF-8 message can hold: sent as is, the JSON encoder fails. Control characters (ESC, BEL, a
newline) are valid but reach a terminal or a host's UI raw. So a name is shown in the escape a
Python string literal reads: a lone surrogate as ``\\udcXX``, a control character as ``\\n``,
``\\t``, ``\\r`` or ``\\xNN``, and (in :func:`escape_name` only, so the escape reads back
unambiguously) a backslash as ``\\\\``. Put in a quoted (not raw) Python string, the shown name is
the very str ``os`` gave, which opens the same file; :func:`unescape_name` reads it back for the
server's own use (completing a folder a shown name named).
"""

from __future__ import annotations

import re

__all__ = ["escape_name", "escape_surrogates", "needs_escape", "unescape_name"]

_SPECIAL = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}

_ESCAPED = re.compile(r"[\\\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""What :func:`escape_name` rewrites: a backslash, C0 and C1 controls and DEL, lone surrogates."""

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _one(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SPECIAL:
        return _SPECIAL[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def needs_escape(name: str) -> bool:
    """Whether :func:`escape_name` changes ``name``."""
    return _ESCAPED.search(name) is not None


def escape_name(name: str) -> str:
    """``name`` as a Python string literal's body: printable, valid UTF-8, and reversible."""
    return _ESCAPED.sub(_one, name) if needs_escape(name) else name


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate as ``\\udcXX``, the rest untouched: a path in prose.

    Prose keeps its backslashes and newlines, so only what cannot be sent is rewritten; the
    escape is the one :func:`escape_name` writes, which Python reads back to the same path.
    """
    return _SURROGATE.sub(_one, text) if _SURROGATE.search(text) else text


def unescape_name(shown: str) -> str | None:
    """The name :func:`escape_name` showed as ``shown``; None when ``shown`` holds a broken
    escape (a trailing backslash: someone still typing). Text without a backslash is itself."""
    if "\\" not in shown:
        return shown
    try:
        # Non-Latin-1 text survives the trip as \uXXXX escapes the decoder reads back.
        return shown.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return None
