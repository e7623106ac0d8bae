"""The two tiers of docs and which one wins: what exists, what is withheld, what a read returns.

A shipped tier (read-only, part of the wheel) and a local tier (the agent's). Shadowing (a local
file wins over the shipped one) and withholding (shipped ids served as if not shipped) are
written here only; everything that reads a doc, lists docs or describes one asks this part.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from biopb_mcp.docs import views
from biopb_mcp.docs.frontmatter import Parsed, parse
from biopb_mcp.docs.ids import INDEX_ID, check_id
from biopb_mcp.docs.tier import Found, Peeked, Tier
from biopb_mcp.docs.views import Origin
from biopb_mcp.docs.visibility import is_banked
from biopb_mcp.errors import DocError, DocNotFound, DocProblem, DocUnreadable, InvalidDocId
from biopb_mcp.fs.stamps import FileCache, Stamp, stamp_of

__all__ = ["INDEX_FILE", "WITHHELD_LINK", "DocInfo", "Shelf"]

logger = logging.getLogger(__name__)

INDEX_FILE = "index.md"
"""The index's file name, in the local tier (the shipped tier holds the release's)."""

WITHHELD_LINK = "[[…]]"
"""What a link to a withheld doc shows instead of its target: that a link was there, not where."""

_V = TypeVar("_V")

_LINK = re.compile(r"\[\[([^\[\]\s|#]+)\]\]")


@dataclass(frozen=True)
class DocInfo:
    """Metadata of one doc, derived from where its file sits and its frontmatter."""

    doc_id: str
    title: str
    description: str
    origin: Origin
    updated: str
    packages: list[str]
    path: Path


class Shelf:
    """The local and the shipped tier, with the shadowing and withholding rules. Thread-safe."""

    def __init__(
        self, local_dir: Path, shipped_dir: Path, *, read_only: bool = False, withhold: Iterable[str] = ()
    ) -> None:
        self.local = Tier(Path(local_dir), writable=not read_only)
        self.shipped = Tier(Path(shipped_dir), writable=False)
        self.local_dir = self.local.root
        self.shipped_dir = self.shipped.root
        self.withheld = frozenset(withhold)
        """Shipped ids treated as not shipped (see `withholds`)."""
        self._parsed_cache: FileCache[str, Parsed] = FileCache()

    @property
    def index_path(self) -> Path:
        """The local index file."""
        return self.local_dir / INDEX_FILE

    def folders(self) -> tuple[list[str], bool]:
        """Every folder of both tiers that may hold docs, and whether a link was met in them (a
        folder link is not descended). Hidden folders (history, locks) never hold docs."""
        folders: list[str] = []
        linked = False
        for root in (self.local_dir, self.shipped_dir):
            pending = [os.fspath(root)]
            while pending:
                directory = pending.pop()
                folders.append(directory)
                try:
                    entries = list(os.scandir(directory))
                except OSError:
                    continue
                for entry in entries:
                    if entry.is_symlink():
                        linked = True
                    elif entry.is_dir() and not entry.name.startswith("."):
                        pending.append(entry.path)
        return folders, linked

    def withholds(self, doc_id: str) -> bool:
        """Whether the shipped doc `doc_id` is withheld: to every reader it is not shipped.

        The one place that decides. A withheld doc is never listed, read, searched, suggested or
        named by a link in a shipped doc, so nothing the server answers reveals that it exists;
        a local doc of the same id is the agent's own and reads as any local doc.
        """
        return doc_id in self.withheld

    def shipped_files(self) -> dict[str, str]:
        """id -> file path of every shipped doc this store serves (withheld ones left out)."""
        files = self.shipped.files()
        return {i: p for i, p in files.items() if not self.withholds(i)} if self.withheld else files

    def has_shipped(self, doc_id: str) -> bool:
        """Whether a served shipped doc is there for `doc_id`."""
        return not self.withholds(doc_id) and self.shipped.exists(doc_id)

    def shown(self, text: str) -> str:
        """A shipped text as served: each link to a withheld doc shows as `WITHHELD_LINK`."""
        if not self.withheld or "[[" not in text:
            return text
        return _LINK.sub(lambda m: WITHHELD_LINK if self.withholds(m.group(1)) else m.group(0), text)

    def shipped_ids(self, files: dict[str, str] | None = None) -> list[str]:
        """Shipped ids the release lists: banked ids (``visibility.is_banked``) left out."""
        files = self.shipped_files() if files is None else files
        return sorted(i for i in files if not self.withholds(i) and not is_banked(i))

    def doc_ids(self) -> list[str]:
        """Every id that names a doc file in either tier (banked and unindexed local included), sorted.

        A file listed here may still be unreadable (not UTF-8, …): doc_text / read_doc say so.
        """
        return sorted(set(self.local.ids()) | set(self.shipped_files()))

    def doc_entries(self) -> list[tuple[str, str, Origin]]:
        """`(id, file path, origin)` of every doc, shadowing applied, from one walk per tier.

        What search and other whole-corpus views read: the same walk as `doc_ids`, so a view never
        finds a file the store would not (hidden names, history, temp files, escaping symlinks).
        """
        local = self.local.files()
        shipped = self.shipped_files()
        out = [(doc_id, path, Origin.SHIPPED) for doc_id, path in shipped.items() if doc_id not in local]
        out += [(doc_id, path, Origin.SHADOW if doc_id in shipped else Origin.LOCAL) for doc_id, path in local.items()]
        return out

    def not_found(self, doc_id: str, what: str = "", *, kind: DocProblem = DocProblem.NO_DOC) -> DocNotFound:
        """The refusal for an id no tier has, with the closest ids that exist."""
        close = difflib.get_close_matches(doc_id, self.doc_ids(), n=3, cutoff=0.6)
        hint = f" Closest: {', '.join(close)}." if close else ""
        return DocNotFound(f"No doc {doc_id!r}{what}.{hint}", kind=kind, doc_id=doc_id, suggestions=close)

    def locate(self, doc_id: str) -> tuple[Origin, Path]:
        """(origin, path) of the doc that wins for `doc_id`: local over shipped, without reading it.

        The shadowing rule, written only here. Something at the local path wins even when it
        cannot be read (a directory named `x.md`): the read then says what is wrong with it,
        rather than quietly serving the shipped text.

        Raises:
            InvalidDocId: the id resolves outside a tier.
            DocNotFound: neither tier has it.
        """
        local = self.local.path(doc_id)
        if os.path.exists(local):
            shadow = self.has_shipped(doc_id)
            return (Origin.SHADOW if shadow else Origin.LOCAL), local
        shipped = self.shipped.path(doc_id)
        if not self.withholds(doc_id) and os.path.exists(shipped):
            return Origin.SHIPPED, shipped
        raise self.not_found(doc_id)

    def tier_of(self, origin: Origin) -> Tier:
        return self.shipped if origin == Origin.SHIPPED else self.local

    def resolve(self, doc_id: str) -> tuple[str, Origin, Path]:
        """(text, origin, path) of the doc that wins for `doc_id` (see `_locate`)."""
        origin, path = self.locate(doc_id)
        try:
            text = self.tier_of(origin).read(doc_id)
            return (self.shown(text) if origin == Origin.SHIPPED else text), origin, path
        except FileNotFoundError:  # removed since _locate looked
            raise self.not_found(doc_id) from None

    def read_local(self, doc_id: str) -> str | None:
        """The local text, or None when there is no local file. Raises DocUnreadable, InvalidDocId."""
        try:
            return self.local.read(doc_id)
        except FileNotFoundError:
            return None

    def read_shipped(self, doc_id: str) -> str | None:
        """The shipped text as served, or None when the release has no such doc (or withholds it).

        Raises DocUnreadable, InvalidDocId.
        """
        if self.withholds(check_id(doc_id)):
            return None
        try:
            return self.shown(self.shipped.read(doc_id))
        except FileNotFoundError:
            return None

    def parsed_and_mtime(self, tier: Tier, doc_id: str) -> tuple[Parsed, float]:
        """Parsed frontmatter of a doc file and its mtime, from one stat, cached on the file's stamp."""
        path = tier.file(doc_id)
        now = time.time_ns()
        st = os.stat(path)
        stamps = (stamp_of(st),)
        hit = self._parsed_cache.get(path, stamps)
        if hit is not None:
            return hit, st.st_mtime
        try:
            text = tier.read(doc_id)
        except InvalidDocId as exc:  # the walk found it inside; a folder became a link since
            raise DocUnreadable(str(exc), doc_id=doc_id) from exc
        parsed = parse(text)
        self._parsed_cache.put(path, stamps, parsed, now)
        return parsed, st.st_mtime

    def description(self, tier: Tier, doc_id: str) -> str:
        """The one-line description of a doc file (its title if it has none); never raises."""
        try:
            parsed = self.parsed_and_mtime(tier, doc_id)[0]
        except (OSError, DocUnreadable, InvalidDocId) as exc:
            logger.warning("Docs: cannot describe %s: %s", doc_id, exc)
            return "(unreadable)"
        return parsed.description or parsed.title or ""

    def doc_text(self, doc_id: str) -> tuple[str, Origin]:
        """(file text without read_doc's header, origin) of the doc that wins for `doc_id`.

        The text is exactly what read_doc shows under its header, frontmatter included.

        Raises:
            InvalidDocId, DocNotFound, DocUnreadable.
        """
        if check_id(doc_id) == INDEX_ID:
            raise _index_is_not_a_doc()
        text, origin, _ = self.resolve(doc_id)
        return text, origin

    def info(self, doc_id: str) -> DocInfo:
        """Id, title, description, origin, updated, packages and path of one doc.

        Raises:
            InvalidDocId, DocNotFound, DocUnreadable.
        """
        if check_id(doc_id) == INDEX_ID:
            raise _index_is_not_a_doc()
        origin, path = self.locate(doc_id)
        try:
            parsed, mtime = self.parsed_and_mtime(self.tier_of(origin), doc_id)
        except FileNotFoundError:  # removed since _locate looked
            raise self.not_found(doc_id) from None
        return DocInfo(
            doc_id=doc_id,
            title=parsed.title or doc_id,
            description=parsed.description,
            origin=origin,
            updated=parsed.updated or views.when(mtime),
            packages=parsed.packages,
            path=path,
        )

    def winners(self, doc_ids: Sequence[str], want_text: Callable[[str, Stamp], bool]) -> Iterator[Peeked | str]:
        """`Tier.peek_many` over both tiers with the shadowing rule: a peek for each id whose
        doc wins in a folder read as a batch, or the id alone where a link is on the way (the
        caller takes the one-doc path). Ids with no doc are left out."""
        pending = list(doc_ids)
        for tier in (self.local, self.shipped):
            if tier is self.shipped:
                pending = [doc_id for doc_id in pending if not self.withholds(doc_id)]
            absent = []
            for peek in tier.peek_many(pending, want_text):
                if peek.found is Found.NOTHING:
                    absent.append(peek.doc_id)
                elif peek.found is Found.LINK:
                    yield peek.doc_id
                elif tier is self.shipped and peek.text is not None and self.withheld:
                    yield dataclasses.replace(peek, text=self.shown(peek.text))
                else:
                    yield peek
            pending = absent

    def texts(self, doc_ids: Sequence[str]) -> dict[str, str | DocError]:
        """`doc_text`'s text of each id, or why it cannot be read; an id with no doc is left out.

        For a batch (search indexing thousands of docs): each folder is opened once.
        """
        found: dict[str, str | DocError] = {}
        for peek in self.winners(doc_ids, lambda _path, _stamp: True):
            if isinstance(peek, Peeked):
                found[peek.doc_id] = peek.error if peek.error is not None else peek.text or ""
                continue
            try:
                found[peek] = self.doc_text(peek)[0]
            except DocNotFound:
                continue
            except DocError as exc:
                found[peek] = exc
            except (OSError, UnicodeError) as exc:
                found[peek] = DocUnreadable(f"Cannot read doc {peek!r}: {exc}.", doc_id=peek)
        return found

    def derived(
        self, doc_ids: Sequence[str], derive: Callable[[str], _V], cache: FileCache[str, _V]
    ) -> dict[str, _V | DocError]:
        """``derive(text)`` of the doc that wins for each id, or why it cannot be read; an id
        with no doc is left out.

        Kept in ``cache`` under the file's path and stamp, so a doc is read again only once it
        changed (an edit replaces its entry: nothing grows with edits), and the caller's cache
        bounds what is kept. The cache must belong to this shelf (withholding shapes the text).
        """
        found: dict[str, _V | DocError] = {}
        cached: dict[str, _V] = {}

        def want_text(path: str, st: Stamp) -> bool:
            hit = cache.get(path, (st,))
            if hit is not None:
                cached[path] = hit
            return hit is None

        read_from = time.time_ns()  # before any read: a change during one is never cached
        for peek in self.winners(doc_ids, want_text):
            if not isinstance(peek, Peeked):  # a link below a tier root: the one-doc path decides
                try:
                    found[peek] = derive(self.doc_text(peek)[0])
                except DocNotFound:
                    continue
                except DocError as exc:
                    found[peek] = exc
                except (OSError, UnicodeError) as exc:
                    found[peek] = DocUnreadable(f"Cannot read doc {peek!r}: {exc}.", doc_id=peek)
            elif peek.error is not None:
                found[peek.doc_id] = peek.error
            elif peek.text is not None:
                assert peek.stamp is not None
                found[peek.doc_id] = value = derive(peek.text)
                cache.put(peek.path, (peek.stamp,), value, read_from)
            else:
                found[peek.doc_id] = cached[peek.path]
        return found

    def summaries(self, doc_ids: Sequence[str]) -> dict[str, Parsed | DocError]:
        """Parsed frontmatter of the doc that wins for each id, or why it cannot be read; an id
        whose doc is gone is left out. In the ids' order.

        `info`'s title and description for a batch (a listing page), with the same shadowing
        and the same cache: each folder is opened once (see `Tier.peek_many`), where `info`
        walks every path from the root.
        """
        found: dict[str, Parsed | DocError] = {}
        cached: dict[str, Parsed] = {}

        def want_text(path: str, st: Stamp) -> bool:
            hit = self._parsed_cache.get(path, (st,))
            if hit is not None:
                cached[path] = hit
            return hit is None

        read_from = time.time_ns()  # before any read: a change during one is never cached
        for peek in self.winners(doc_ids, want_text):
            if not isinstance(peek, Peeked):  # a link below a tier root: the one-doc path decides
                try:
                    found[peek] = self.parsed_and_mtime(self.tier_of(self.locate(peek)[0]), peek)[0]
                except (DocNotFound, FileNotFoundError):
                    continue
                except (DocUnreadable, InvalidDocId) as exc:
                    found[peek] = exc
                except OSError as exc:
                    found[peek] = DocUnreadable(f"Cannot read doc {peek!r}: {exc.strerror or exc}.", doc_id=peek)
            elif peek.error is not None:
                found[peek.doc_id] = peek.error
            elif peek.text is not None:
                assert peek.stamp is not None
                found[peek.doc_id] = parsed = parse(peek.text)
                self._parsed_cache.put(peek.path, (peek.stamp,), parsed, read_from)
            else:
                found[peek.doc_id] = cached[peek.path]
        return {doc_id: found[doc_id] for doc_id in doc_ids if doc_id in found}

    def local_state(self) -> dict[str, tuple[int, int]]:
        """id (and "index") -> (mtime_ns, size) of every local doc file, for change watchers."""
        state: dict[str, tuple[int, int]] = {}
        try:
            st = os.stat(self.index_path)
            state[INDEX_ID] = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
        for doc_id, entry in self.local.scan():
            try:
                st = entry.stat()
            except OSError:
                continue
            state[doc_id] = (st.st_mtime_ns, st.st_size)  # type: ignore[index]
        return state


def _index_is_not_a_doc() -> InvalidDocId:
    return InvalidDocId(
        "'index' is not a doc: it is the index (render_index() renders it).",
        kind=DocProblem.INDEX_NOT_A_DOC,
        doc_id=INDEX_ID,
    )
