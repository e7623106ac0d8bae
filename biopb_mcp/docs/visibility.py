"""What the docs show: for each doc, whether the index lists it, surfaces it, or leaves it to be
read by id; one immutable answer per state of the index and the tiers.

Every reader that shows docs without being asked for one by id (the rendered index, search,
resources, prompts, completions, the pack) asks a :class:`Visibility` instead of deciding again.
It is built from one snapshot: the index text, the served shipped docs, the local tier (asked per
id, and walked whole only when a question needs every doc: a folder line, the reading order, the
corpus) and the shipped ids changed at the last version bump. The listing keeps
the last one while the files and folders it was built from keep their stamps (``fs.stamps``).

The rules, written here only:

* **listed**: an index entry that resolves, then the New-shipped tail (shipped docs with no entry,
  neither ignored nor banked), then the stale tail (local copies of shipped docs that changed at
  the last bump). The index shows these; resources and the pack list them.
* **surfaced**: the listed docs and the docs under a listed folder line (`- x/:`), banked and
  ignored ones left out. Search, prompts and completions cover these first.
* **ignored**: named on the index's `ignored:` line and not surfaced by an entry.
* **banked**: a segment of the id starts with `_`: never in the New-shipped tail or under a folder line.
* **withheld**: a shipped id the store serves as not shipped (the shelf decides, see
  ``Shelf.withholds``); with no local copy it is no doc at all.
* **unlisted**: any other doc, readable by exact id only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.ids import INDEX_ID
from biopb_mcp.docs.views import Origin
from biopb_mcp.errors import DocUnreadable
from biopb_mcp.fs.stamps import Stamp

__all__ = ["Shown", "Visibility", "build", "is_banked"]


class Shown(StrEnum):
    """How a doc id is shown, the strongest first."""

    LISTED = "listed"
    SURFACED = "surfaced"
    IGNORED = "ignored"
    BANKED = "banked"
    UNLISTED = "unlisted"
    WITHHELD = "withheld"
    ABSENT = "absent"


def is_banked(doc_id: str) -> bool:
    """Whether a segment of ``doc_id`` starts with ``_``: kept in the tier, never offered unasked."""
    return any(segment.startswith("_") for segment in doc_id.split("/"))


@dataclass(frozen=True, eq=False)
class Visibility:
    """What the docs show at one state of the index and the tiers (see the module docstring).

    The walk of every doc is made on first need: the rendered index and the listed ids ask the
    local tier per id (one ``lstat`` per segment, the walk's own rules), so reading the index of a
    10,000-doc tier whose folders changed a moment ago costs no walk.
    """

    index: index_mod.IndexFile
    """The parsed index the rest derives from (the local file, else the shipped one)."""
    index_text: str
    problem: DocUnreadable | None
    """Why the local index could not be read (the shipped one was used), or None."""
    shipped: Mapping[str, str]
    """id -> file path of every shipped doc served (withheld ones left out)."""
    local_has: Callable[[str], bool]
    """Whether the local tier holds a doc for an id, by the rules of the walk (``Tier.has_doc``,
    each folder looked at once per model)."""
    walk: Callable[[], Iterable[tuple[str, str, Origin]]]
    """Every doc as (id, path, origin), shadowing applied (``Shelf.doc_entries``)."""
    changed: frozenset[str] = frozenset()
    """The shipped ids changed at the last version bump."""
    withheld: frozenset[str] = frozenset()
    inputs: Mapping[str, Stamp | None] = field(default_factory=dict)
    """The files and folders it was derived from, with their stamps taken before the reads; empty
    for a model built while one of them was racy (never kept, so never checked against them)."""

    @functools.cached_property
    def docs(self) -> Mapping[str, tuple[str, Origin]]:
        """id -> (file path, origin) of every doc, shadowing applied, in walk order."""
        return {doc_id: (path, origin) for doc_id, path, origin in self.walk()}

    def _local(self, doc_id: str) -> bool:
        if "docs" in self.__dict__:  # walked already: answer from the walk
            found = self.docs.get(doc_id)
            return found is not None and found[1] != Origin.SHIPPED
        asked = self._asked
        if doc_id not in asked:
            asked[doc_id] = self.local_has(doc_id)
        return asked[doc_id]

    @functools.cached_property
    def _asked(self) -> dict[str, bool]:
        """The local tier's answers so far, so one model asks it once per id."""
        return {}

    def exists(self, doc_id: str) -> bool:
        """Whether a doc resolves for ``doc_id`` in either tier."""
        return doc_id in self.shipped or self._local(doc_id)

    def shadows(self, doc_id: str) -> bool:
        """Whether a local copy hides a shipped doc of ``doc_id``."""
        return doc_id in self.shipped and self._local(doc_id)

    @functools.cached_property
    def ignored(self) -> frozenset[str]:
        return frozenset(self.index.ignored)

    @functools.cached_property
    def hooks(self) -> Mapping[str, str]:
        """id -> the hook of its index entry (folder lines left out)."""
        return {e.doc_id: e.hook for e in self.index.entries if not e.collection}

    @functools.cached_property
    def new(self) -> tuple[str, ...]:
        """The New-shipped tail, sorted."""
        entries = self.index.entry_ids
        return tuple(sorted(i for i in self.shipped if i not in entries and i not in self.ignored and not is_banked(i)))

    @functools.cached_property
    def stale(self) -> tuple[str, ...]:
        """The stale tail, sorted."""
        return tuple(sorted(i for i in self.changed if i in self.shipped and self._local(i)))

    @functools.cached_property
    def listed(self) -> tuple[str, ...]:
        resolving = [e.doc_id for e in self.index.entries if not e.collection and self.exists(e.doc_id)]
        return tuple(dict.fromkeys(resolving + list(self.new) + list(self.stale)))

    @functools.cached_property
    def surfaced(self) -> frozenset[str]:
        surfaced = set(self.listed)
        prefixes = tuple(e.doc_id + "/" for e in self.index.entries if e.collection)
        if prefixes:
            # "/_" in "/" + id: a banked segment, without splitting every id of a large tier
            surfaced.update(
                i for i in self.docs if i.startswith(prefixes) and "/_" not in "/" + i and i not in self.ignored
            )
        return frozenset(surfaced)

    def state(self, doc_id: str) -> Shown:
        """How ``doc_id`` is shown (the strongest that applies)."""
        if doc_id in self._listed_set:
            return Shown.LISTED
        if doc_id in self.surfaced:
            return Shown.SURFACED
        if not self.exists(doc_id):
            return Shown.WITHHELD if doc_id in self.withheld else Shown.ABSENT
        if doc_id in self.ignored:
            return Shown.IGNORED
        if is_banked(doc_id):
            return Shown.BANKED
        return Shown.UNLISTED

    @functools.cached_property
    def _listed_set(self) -> frozenset[str]:
        return frozenset(self.listed)

    def reading_order(self) -> list[str]:
        """``index``, the entries the index surfaces (in its order), the other surfaced docs, then
        every other doc not ignored (sorted): the order a person picking an id wants."""
        ordered = [INDEX_ID]
        ordered += [e.doc_id for e in self.index.entries if not e.collection and e.doc_id in self.surfaced]
        ordered += sorted(self.surfaced)
        ordered += sorted(doc_id for doc_id in self.docs if doc_id not in self.ignored)
        return list(dict.fromkeys(ordered))


def build(
    index_text: str,
    problem: DocUnreadable | None,
    shipped: Mapping[str, str],
    local_has: Callable[[str], bool],
    walk: Callable[[], Iterable[tuple[str, str, Origin]]],
    changed: frozenset[str],
    withheld: frozenset[str] = frozenset(),
    inputs: Mapping[str, Stamp | None] | None = None,
) -> Visibility:
    """The visibility of one snapshot: the index text, the served ``shipped`` docs, the local tier
    (``local_has`` per id, ``walk`` for every doc: ``Shelf.doc_entries``) and the shipped ids
    ``changed`` at the last version bump. Nothing is walked here."""
    return Visibility(
        index=index_mod.parse(index_text),
        index_text=index_text,
        problem=problem,
        shipped=shipped,
        local_has=local_has,
        walk=walk,
        changed=changed,
        withheld=withheld,
        inputs=dict(inputs or {}),
    )
