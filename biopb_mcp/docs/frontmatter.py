"""Reading doc files tolerantly: bytes to text, and the small optional frontmatter block.

Scientists edit the local tier by hand, in any editor, so nothing here is fatal: a BOM and
Windows line endings are accepted, a frontmatter line that is not `key: value` is skipped, an
unknown key is ignored. Only a file that is not text at all (not UTF-8, binary, huge, a
directory, unreadable) is an error, and that error names the file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from biopb_mcp.docs.limits import FILE_MAX_BYTES
from biopb_mcp.errors import DocUnreadable, Unreadable
from biopb_mcp.fs import nofollow

DESCRIPTION_MAX_CHARS = 200
"""An inferred description is one line; longer first paragraphs are cut here."""

_FENCE = re.compile(r"^\s*(```|~~~)")
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")
_FRONTMATTER_MAX_LINES = 100


def read_text(path: Path, st: os.stat_result | None = None) -> str:
    """The text of a doc file: UTF-8 (BOM dropped), line endings normalised to `\\n`.

    `st` is the caller's fresh stat of `path`, when it has one, to save a second.

    Raises:
        FileNotFoundError: no file there (the caller decides what that means).
        DocUnreadable: a file that is there but is not a readable UTF-8 text file.
    """
    try:
        st = os.stat(path) if st is None else st
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DocUnreadable(f"Cannot read {path}: {exc.strerror or exc}.", path=str(path)) from exc
    if stat.S_ISDIR(st.st_mode):
        raise _directory(path)
    if not stat.S_ISREG(st.st_mode):
        raise DocUnreadable(f"{path} is not a regular file", why=Unreadable.NOT_REGULAR, path=str(path))
    if st.st_size > FILE_MAX_BYTES:
        raise _too_big(path, st.st_size)
    try:
        with open(path, "rb") as fh:
            # Not read(FILE_MAX_BYTES + 1): that allocates a 5 MB buffer per call (3x the cost of a
            # small doc's whole read). read() sizes from fstat; decode() re-checks the length in
            # case the file grew since the stat above.
            raw = fh.read()
    except FileNotFoundError:
        raise
    except PermissionError as exc:
        raise _denied(path) from exc
    except OSError as exc:
        raise DocUnreadable(f"Cannot read {path}: {exc.strerror or exc}.", path=str(path)) from exc
    return decode(raw, path)


def read_text_in(root: Path, rel: str) -> str:
    """`read_text` of `root/rel` with no link followed below `root` (see nofollow).

    Raises:
        FileNotFoundError: no file there.
        DocUnreadable: a link on the way, a directory, not a regular file, unreadable, not UTF-8.
    """
    return _read_doc_bytes(os.path.join(root, rel), lambda: nofollow.read_bytes(root, rel, max_bytes=FILE_MAX_BYTES))


def read_text_at(dir_fd: int, name: str, path: str) -> str:
    """`read_text_in` of the file `name` in an open directory; `path` names it in errors."""
    return _read_doc_bytes(path, lambda: nofollow.read_bytes_at(dir_fd, name, path, max_bytes=FILE_MAX_BYTES))


def _read_doc_bytes(path: str, read: Callable[[], tuple[bytes, os.stat_result]]) -> str:
    """The decoded text ``read()`` returns, its errors worded for a doc file at ``path``."""
    try:
        raw, _ = read()
    except FileNotFoundError:
        raise
    except nofollow.LinkRefused as exc:
        raise DocUnreadable(f"Cannot read {path}: {exc.strerror}.", path=str(path)) from exc
    except nofollow.TooBig as exc:
        raise _too_big(path, exc.size) from exc
    except IsADirectoryError as exc:
        raise _directory(path) from exc
    except PermissionError as exc:
        raise _denied(path) from exc
    except OSError as exc:
        raise DocUnreadable(f"Cannot read {path}: {exc.strerror or exc}.", path=str(path)) from exc
    return decode(raw, path)


def decode(raw: bytes, path: Path | str) -> str:
    """Decode a doc file's bytes, or raise DocUnreadable naming `path` and what is wrong."""
    if len(raw) > FILE_MAX_BYTES:
        raise DocUnreadable(f"{path} is over the {FILE_MAX_BYTES:,} bytes a doc file may have.", path=str(path))
    if b"\x00" in raw:
        raise DocUnreadable(
            f"{path} contains NUL bytes: it is a binary file, not markdown", why=Unreadable.BINARY, path=str(path)
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        byte = raw[exc.start]
        raise DocUnreadable(
            f"{path} is not UTF-8 text (byte 0x{byte:02x} at offset {exc.start})",
            why=Unreadable.NOT_UTF8,
            path=str(path),
            byte=byte,
            offset=exc.start,
        ) from exc
    return normalize(text)


# The cases below state only what is wrong; text.unreadable adds what the reader does about it.


def _directory(path: Path | str) -> DocUnreadable:
    return DocUnreadable(f"{path} is a directory, not a doc file", why=Unreadable.DIRECTORY, path=str(path))


def _too_big(path: Path | str, size: int) -> DocUnreadable:
    return DocUnreadable(
        f"{path} is {size:,} bytes, over the {FILE_MAX_BYTES:,} a doc file may have",
        why=Unreadable.TOO_BIG,
        path=str(path),
        size=size,
        limit=FILE_MAX_BYTES,
    )


def _denied(path: Path | str) -> DocUnreadable:
    return DocUnreadable(f"Cannot read {path}: permission denied", why=Unreadable.PERMISSION, path=str(path))


def normalize(text: str) -> str:
    """Drop a BOM and turn CRLF / CR line endings into LF."""
    text = text.removeprefix("\ufeff")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


@dataclass(frozen=True)
class Parsed:
    """What the store knows about a doc's text: its frontmatter, title and description."""

    meta: dict[str, str | list[str]] = field(default_factory=dict)
    body: str = ""
    title: str | None = None
    description: str = ""

    @property
    def packages(self) -> list[str]:
        """`packages:` as a list (`name~=x.y.z`), from an inline list or a comma-separated value."""
        value = self.meta.get("packages", [])
        items = value if isinstance(value, list) else value.split(",")
        return [item.strip() for item in items if item.strip()]

    @property
    def updated(self) -> str | None:
        """`updated:` when the author set it, else None (the caller falls back to the mtime)."""
        value = self.meta.get("updated")
        if isinstance(value, list):
            value = ", ".join(value)
        return value.strip() or None if value else None


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _value(raw: str) -> str | list[str]:
    raw = raw.strip()
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return [_unquote(item) for item in inner.split(",") if item.strip()] if inner else []
    return _unquote(raw)


def split_frontmatter(text: str) -> tuple[dict[str, str | list[str]], str]:
    """Split `---` frontmatter from the body; a block without a closing line is plain body."""
    if not text.startswith("---\n"):
        return {}, text
    lines = text.split("\n")
    end = None
    for i in range(1, min(len(lines), _FRONTMATTER_MAX_LINES + 1)):
        if lines[i].rstrip() in ("---", "..."):
            end = i
            break
    if end is None:
        return {}, text
    meta: dict[str, str | list[str]] = {}
    block = lines[1:end]
    i = 0
    while i < len(block):
        match = _KEY_LINE.match(block[i])
        i += 1
        if not match:
            continue  # garbage, comments, YAML we do not speak: ignored, never fatal
        key, raw = match.group(1).lower(), match.group(2)
        if raw.strip() in ("|", ">", "|-", ">-", ""):
            # A YAML block scalar or an indented list: gather the indented lines that follow.
            gathered: list[str] = []
            while i < len(block) and (block[i].startswith((" ", "\t")) or block[i] == ""):
                gathered.append(block[i].strip())
                i += 1
            items = [g[1:].strip() for g in gathered if g.startswith("- ")]
            if items and len(items) == len([g for g in gathered if g]):
                meta[key] = [_unquote(item) for item in items]
            else:
                meta[key] = " ".join(g for g in gathered if g)
            continue
        meta[key] = _value(raw)
    return meta, "\n".join(lines[end + 1 :])


def first_paragraph(body: str) -> str:
    """The first prose paragraph of a body as one line (headings and code skipped), cut to size."""
    in_fence = False
    para: list[str] = []
    for line in body.split("\n"):
        if _FENCE.match(line):
            if para:
                break
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        stripped = line.strip()
        if not stripped:
            if para:
                break
            continue
        if stripped.startswith("#") or stripped.startswith("<!--"):
            if para:
                break
            continue
        para.append(stripped)
    return one_line(" ".join(para))


def one_line(text: str, limit: int = DESCRIPTION_MAX_CHARS) -> str:
    """Collapse whitespace to single spaces and cut to `limit` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def heading_text(line: str, level: int) -> str | None:
    """The text of `line` if it is an ATX heading of exactly `level` (`## Title ##`), else None.

    Plain string scans, not a regex: the obvious pattern (lazy text, then optional spaces, closing
    hashes and spaces) backtracks cubically on a long run of spaces, and one hostile line froze
    the whole server for minutes. Same result as that pattern: the text is stripped, a closing run
    of `#` is dropped (`# ###` keeps one `#`), a heading with no text is None.
    """
    if not line.startswith("#" * level):
        return None
    rest = line[level:]
    if not rest[:1].isspace():
        return None
    text = rest.lstrip()
    if not text:
        return None
    title = text.rstrip().rstrip("#").rstrip()
    return title or text[0]


def first_h1(body: str) -> str | None:
    """The first level-one heading outside code fences, or None."""
    in_fence = False
    for line in body.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            title = heading_text(line, 1)
            if title is not None:
                return title
    return None


def parse(text: str) -> Parsed:
    """Frontmatter, title and description of a doc's (already normalised) text. Never raises."""
    meta, body = split_frontmatter(text)
    raw_desc = meta.get("description", "")
    if isinstance(raw_desc, list):
        raw_desc = ", ".join(raw_desc)
    description = one_line(raw_desc) if raw_desc.strip() else first_paragraph(body)
    return Parsed(meta=meta, body=body, title=first_h1(body), description=description)
