"""The files of a working directory that start with what a person typed: completion candidates.

The directory is the agent's (its kernel's working directory): a prompt argument that names a file
is completed from it. Nothing outside it is offered or opened: a typed path is relative, each
folder on the way is opened without following a link (a link could lead anywhere), and a link
inside it is never offered. Hidden names are offered only once the typed name starts with `.`.

A value is the path as :mod:`biopb_mcp.fs.names` shows it (a name that is not valid UTF-8, or
holds a control character or a backslash, in a Python string literal's escapes), and what was
typed is read back through the same escape, so a shown folder completes further.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from biopb_mcp.fs import nofollow
from biopb_mcp.fs.names import escape_name, unescape_name

__all__ = ["MAX_MATCHES", "Matches", "matching_paths"]

MAX_MATCHES = 100
"""Most values one completion answer may carry (the MCP spec's limit)."""


@dataclass(frozen=True)
class Matches:
    """Matching paths relative to the directory, folders ending in `/`, sorted, each shown in the
    escape of :func:`~biopb_mcp.fs.names.escape_name`; and how many matched in all (more than
    ``values`` when cut)."""

    values: list[str]
    total: int


NONE = Matches([], 0)


def matching_paths(root: Path, typed: str, limit: int = MAX_MATCHES) -> Matches:
    """Paths under ``root`` that start with ``typed`` (a relative path, `/`-separated): the
    entries of its folder part whose name starts with its last part.

    An absolute path, a `..` or `~` part, a folder part that is missing, not a folder or a link,
    or an unreadable folder give no matches (never an error: a person is still typing), and so
    does a broken escape.
    """
    decoded = unescape_name(typed)
    if decoded is None:
        return NONE
    typed = decoded
    folder, _, start = typed.rpartition("/")
    parts = nofollow.split(folder)
    if typed.startswith(("/", "~")) or any(part in (".", "..") for part in parts) or "\x00" in typed:
        return NONE
    prefix = "".join(part + "/" for part in parts)
    found: list[str] = []
    try:
        with nofollow.open_dir(root, parts) as dir_fd, os.scandir(dir_fd) as entries:
            for entry in entries:
                name = entry.name
                if not name.startswith(start) or (name.startswith(".") and not start.startswith(".")):
                    continue
                if entry.is_symlink():
                    continue
                found.append(prefix + name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
    except OSError:
        return NONE
    found.sort()
    return Matches([escape_name(path) for path in found[:limit]], len(found))
