"""The files of a working directory that start with what a person typed: completion candidates.

The directory is the agent's (its kernel's working directory): a prompt argument that names a file
is completed from it. Nothing outside it is offered or opened: a typed path is relative, each
folder on the way is opened without following a link (a link could lead anywhere), and a link
inside it is never offered. Hidden names are offered only once the typed name starts with `.`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from biopb_mcp.fs import nofollow

__all__ = ["MAX_MATCHES", "Matches", "matching_paths"]

MAX_MATCHES = 100
"""Most values one completion answer may carry (the MCP spec's limit)."""


@dataclass(frozen=True)
class Matches:
    """Matching paths relative to the directory, folders ending in `/`, sorted; and how many
    matched in all (more than ``values`` when cut)."""

    values: list[str]
    total: int


NONE = Matches([], 0)


def matching_paths(root: Path, typed: str, limit: int = MAX_MATCHES) -> Matches:
    """Paths under ``root`` that start with ``typed`` (a relative path, `/`-separated): the
    entries of its folder part whose name starts with its last part.

    An absolute path, a `..` or `~` part, a folder part that is missing, not a folder or a link,
    or an unreadable folder give no matches (never an error: a person is still typing).
    """
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
    return Matches(found[:limit], len(found))
