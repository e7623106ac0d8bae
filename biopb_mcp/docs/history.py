"""Version history of local docs, kept in `<local>/.history/` (so no write loses text).

Every text a local doc (or the index) has had through write_doc is kept as a numbered version,
the current one included, so "the last version the server saw" is simply the newest one. Before
the next write, a file that differs from it was edited by hand and its on-disk text is kept as its
own version first — a stale body write can then no longer clobber a hand edit for good. At most
`keep` versions per id; numbers keep counting up after pruning. The folder starts with `.` and
holds no `.md` at its top, so it is never an id, never listed, never searched. Restoring is an
ordinary write of an old text, so history never needs a delete.

Callers hold the tier lock around `before_write` / `record`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

from biopb_mcp.docs.frontmatter import decode, one_line
from biopb_mcp.docs.limits import FILE_MAX_BYTES
from biopb_mcp.errors import DocNotFound, DocProblem, DocUnreadable
from biopb_mcp.fs import nofollow

logger = logging.getLogger(__name__)

HISTORY_DIR = ".history"
VERSIONS_FILE = "versions.jsonl"
"""Append-only log, one JSON line per version: a write appends a line instead of renaming a
file over the old log (a rename over an existing file is what costs a flush on ext4)."""
_VERSION_FILE = re.compile(r"v([0-9]+)\.txt\Z")

SOURCE_WRITE = "write_doc"
SOURCE_HAND_EDIT = "hand edit"
SOURCE_ON_DISK = "found on disk"
SOURCE_SHIPPED = "shipped text"


@dataclass(frozen=True)
class Version:
    """One kept version: number, when it was saved, its size, where it came from, what changed."""

    n: int
    time: str
    size: int
    source: str
    sha: str
    change: str


def sha(text: str) -> str:
    """Content hash used to tell whether the file still holds the newest version."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stamp(epoch: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(time.time() if epoch is None else epoch))


def first_change(before: str | None, after: str) -> str:
    """One line saying where `after` first differs from `before` (the listing's summary)."""
    if before is None:
        first = next((line for line in after.split("\n") if line.strip()), "")
        return one_line(f"first version: {first}" if first else "first version (empty)", 100)
    a, b = before.split("\n"), after.split("\n")
    for i in range(max(len(a), len(b))):
        old = a[i] if i < len(a) else None
        new = b[i] if i < len(b) else None
        if old != new:
            if new is None:
                return one_line(f"line {i + 1} removed: {old}", 100)
            return one_line(f"line {i + 1}: {new}" if new.strip() else f"line {i + 1}: (blank)", 100)
    return "no textual change"


_MAX_VERSION = 999_999_999
"""The largest number a `@v<N>` view can name (nine digits)."""
_FIELD_TYPES = {"n": int, "time": str, "size": int, "source": str, "sha": str, "change": str}


def _version_from(line: str) -> Version | None:
    """One log line as a Version, or None when it is not exactly one (torn, hand-edited, foreign).

    Every field is type-checked: a line such as `"n": "zz"` parses as JSON, and once trusted it
    broke sorting, numbering and every view of the doc for good. A line nested deeper than the
    parser recurses (RecursionError) is no version either.
    """
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.keys() != _FIELD_TYPES.keys():
        return None
    for key, kind in _FIELD_TYPES.items():
        value = data[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            return None
    if not 1 <= data["n"] <= _MAX_VERSION or data["size"] < 0:
        return None
    return Version(**data)


_PARSED_LOGS = 64
"""Parsed logs kept per tier: the docs being written now, not every doc ever read."""


class History:
    """The history folder of one local tier."""

    def __init__(self, local_dir: Path, keep: int) -> None:
        self.local_dir = local_dir
        self.root = local_dir / HISTORY_DIR
        self.keep = keep
        self._seen: tuple[str, list[Version]] | None = None
        """The log `before_write` just parsed, for the `record` of the same write (one parse, not two)."""
        self._parsed: OrderedDict[str, tuple[str, dict[int, Version], int]] = OrderedDict()
        """doc id -> (log text, its versions by number, unusable lines) as last parsed: the log only
        grows between compactions, so a text that starts with the cached one is parsed from there."""
        self._parsed_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """False when `docs.history_keep` is 0: nothing is kept."""
        return self.keep > 0

    def dir_for(self, doc_id: str) -> Path:
        """One flat folder per id; `/` (never in a segment) maps to `%` (never in an id)."""
        return self.root / doc_id.replace("/", "%")

    def _rel(self, doc_id: str, name: str = "") -> str:
        """`.history/<folder>[/name]` relative to the tier: every file op goes through nofollow."""
        rel = f"{HISTORY_DIR}/{doc_id.replace('/', '%')}"
        return f"{rel}/{name}" if name else rel

    def _read(self, doc_id: str, name: str) -> bytes:
        """A file of the doc's history folder, never through a link (a link there is refused)."""
        try:
            return nofollow.read_bytes(self.local_dir, self._rel(doc_id, name), max_bytes=FILE_MAX_BYTES)[0]
        except nofollow.LinkRefused as exc:
            raise DocUnreadable(f"History of {doc_id!r}: {exc.strerror}.") from exc

    def _log(self, doc_id: str) -> list[Version]:
        """Every version line of the log (a torn last line from a crash is skipped)."""
        folder = self.dir_for(doc_id)
        try:
            raw = self._read(doc_id, VERSIONS_FILE).decode("utf-8")
        except FileNotFoundError:
            try:
                is_dir = stat.S_ISDIR(nofollow.lstat(self.local_dir, self._rel(doc_id)).st_mode)
            except FileNotFoundError:
                return []
            except nofollow.LinkRefused as exc:
                raise DocUnreadable(f"History of {doc_id!r}: {exc.strerror}.") from exc
            return self._rebuild(doc_id) if is_dir else []
        except (OSError, ValueError) as exc:
            logger.warning("Rebuilding unusable history log in %s: %s", folder, exc)
            return self._rebuild(doc_id)
        with self._parsed_lock:
            cached = self._parsed.get(doc_id)
        if cached is not None and raw.startswith(cached[0]) and cached[0].endswith("\n"):
            found, bad, tail = dict(cached[1]), cached[2], raw[len(cached[0]) :]
        else:
            found, bad, tail = {}, 0, raw
        new_bad = 0
        for line in tail.splitlines():
            version = _version_from(line)
            if version is None:
                new_bad += line.strip() != ""
                continue
            found[version.n] = version
        if new_bad:
            logger.warning("Skipped %d unusable line(s) of the history log %s", new_bad, folder / VERSIONS_FILE)
        bad += new_bad
        with self._parsed_lock:
            self._parsed[doc_id] = (raw, found, bad)
            self._parsed.move_to_end(doc_id)
            while len(self._parsed) > _PARSED_LOGS:
                self._parsed.popitem(last=False)
        if raw.strip() and not found:
            logger.warning("Rebuilding unusable history log in %s", folder)
            return self._rebuild(doc_id)
        return sorted(found.values(), key=lambda v: v.n)

    def versions(self, doc_id: str) -> list[Version]:
        """Kept versions of `doc_id`, oldest first (at most `keep`); a broken log is rebuilt."""
        kept = self._log(doc_id)
        return kept[-self.keep :] if self.keep > 0 else kept

    def _rebuild(self, doc_id: str) -> list[Version]:
        found: list[Version] = []
        try:
            names = sorted(nofollow.listdir(self.local_dir, self._rel(doc_id)))
        except OSError:
            return []
        for name in names:
            match = _VERSION_FILE.match(name)
            if not match:
                continue
            try:
                raw, st = nofollow.read_bytes(self.local_dir, self._rel(doc_id, name), max_bytes=FILE_MAX_BYTES)
            except OSError:
                continue
            text = raw.decode("utf-8", errors="replace")
            found.append(Version(int(match.group(1)), _stamp(st.st_mtime), len(raw), "unknown", sha(text), ""))
        return sorted(found, key=lambda v: v.n)

    def read(self, doc_id: str, n: int) -> tuple[Version, str]:
        """Version `n` of `doc_id` and its text.

        Raises:
            DocNotFound: no such version kept (says which ones are).
            DocUnreadable: the version file is damaged.
        """
        kept = self.versions(doc_id)
        match = next((v for v in kept if v.n == n), None)
        if match is None:
            if not kept:
                raise DocNotFound(
                    f"No history for {doc_id!r}: versions are kept from its first write on.",
                    kind=DocProblem.NO_HISTORY,
                    doc_id=doc_id,
                    version=n,
                )
            raise DocNotFound(
                f"No version {n} of {doc_id!r}: the kept versions are v{kept[0].n}–v{kept[-1].n}.",
                kind=DocProblem.NO_VERSION,
                doc_id=doc_id,
                version=n,
                first=kept[0].n,
                last=kept[-1].n,
            )
        path = self.dir_for(doc_id) / f"v{n}.txt"
        try:
            return match, decode(self._read(doc_id, path.name), path)
        except OSError as exc:
            raise DocUnreadable(f"Cannot read history file {path}: {exc}.") from exc

    def before_write(self, doc_id: str, current: str | None, mtime: float | None) -> Version | None:
        """Keep the on-disk text as its own version when the server has not seen it yet.

        Returns the version kept, if any (its source says hand edit or found on disk).
        """
        if not self.enabled or current is None:
            return None
        logged = self._log(doc_id)
        last = logged[-1] if logged else None
        self._seen = (doc_id, logged)
        if last is None:
            return self.record(doc_id, current, SOURCE_ON_DISK, when=mtime)
        if last.sha != sha(current):
            return self.record(doc_id, current, SOURCE_HAND_EDIT, when=mtime)
        return None

    def forget(self) -> None:
        """Drop the log kept between `before_write` and `record`: called when a write ends."""
        self._seen = None

    def record(self, doc_id: str, text: str, source: str, *, when: float | None = None) -> Version | None:
        """Append `text` as the newest version (unless it already is), then prune to `keep`."""
        if not self.enabled:
            return None
        seen, self._seen = self._seen, None
        # The log before_write parsed in this same locked write, else parsed now.
        logged = seen[1] if seen is not None and seen[0] == doc_id else self._log(doc_id)
        kept = logged[-self.keep :]
        digest = sha(text)
        if kept and kept[-1].sha == digest:
            self._seen = (doc_id, logged)
            return None
        before: str | None = None
        if kept:
            last_name = f"v{kept[-1].n}.txt"
            try:
                before = decode(self._read(doc_id, last_name), self.dir_for(doc_id) / last_name)
            except (OSError, DocUnreadable):
                before = None
        n = logged[-1].n + 1 if logged else 1
        data = text.encode("utf-8")
        # A new file, committed by the log line written after it: no rename needed. Whatever sat
        # at that name (a planted link) is unlinked, never written through.
        nofollow.write_new(self.local_dir, self._rel(doc_id, f"v{n}.txt"), data)
        version = Version(n, _stamp(when), len(data), source, digest, first_change(before, text))
        logged.append(version)
        self._seen = (doc_id, logged)
        compact = len(logged) > 2 * self.keep
        # The version this write pushed out of the kept window; at a compaction, every one before
        # the window (also those a lowered `keep` or a crash left behind).
        dropped = (
            logged[: -self.keep] if compact else logged[-self.keep - 1 : -self.keep] if len(logged) > self.keep else []
        )
        if compact:
            # Compact now and then rather than on every write.
            lines = "".join(json.dumps(asdict(v)) + "\n" for v in logged[-self.keep :])
            nofollow.write_atomic(self.local_dir, self._rel(doc_id, VERSIONS_FILE), lines.encode(), durable=False)
            self._seen = (doc_id, logged[-self.keep :])
        else:
            with self._parsed_lock:
                parsed = self._parsed.get(doc_id)
            torn = parsed is not None and parsed[0] != "" and not parsed[0].endswith("\n")  # a crash mid-append
            line = ("\n" if torn else "") + json.dumps(asdict(version)) + "\n"
            nofollow.append(self.local_dir, self._rel(doc_id, VERSIONS_FILE), line.encode())
        # Only once the log names the new version: a crash before this leaves every listed one readable.
        for old in dropped:
            nofollow.unlink(self.local_dir, self._rel(doc_id, f"v{old.n}.txt"))
        return version
