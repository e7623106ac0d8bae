"""Lint rules for hand-edited docs: frontmatter that will not read as written, docs nobody sees,
links that land nowhere, index hooks left behind by a rewrite.

The reader is tolerant on purpose (a bad frontmatter line is skipped, never fatal), so a typo
would otherwise pass silently; ``biopb-mcp docs check`` runs these rules to say where it is.
Each rule returns findings (a kind and its facts); ``biopb_mcp.text.lint`` words them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.frontmatter import (  # what the reader accepts
    _FRONTMATTER_MAX_LINES,
    _KEY_LINE,
    parse,
    read_text,
)
from biopb_mcp.docs.ids import INDEX_ID, is_valid_id
from biopb_mcp.docs.index import IndexFile
from biopb_mcp.docs.limits import BODY_MAX_LINES, INDEX_MAX_ENTRIES
from biopb_mcp.docs.textdiff import line_count
from biopb_mcp.docs.tier import walk_tier
from biopb_mcp.errors import BiopbMcpError, DocUnreadable, InvalidDocId

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = [
    "Finding",
    "Lint",
    "check",
    "check_warnings",
    "dangling_links",
    "frontmatter_problems",
    "stale_hooks",
    "unsurfaced_ids",
]

_LINK = re.compile(r"\[\[([^\[\]\s|#]+)\]\]")  # "[" excluded: a run of "[[[[" stays linear
_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|`[^`\n]*`", re.DOTALL | re.MULTILINE)
"""Fenced blocks and inline code spans: a `[[x]]` quoted there is an example, not a link."""


class Lint(StrEnum):
    """What a lint finding is about; its facts are named beside each kind."""

    BAD_NAME = "bad_name"
    """A file whose name no id reaches: ``tier``, ``path``."""
    UNREADABLE = "unreadable"
    """A doc file that cannot be read: ``tier``, ``doc_id``, ``error`` (the DocUnreadable or OSError)."""
    FRONTMATTER_UNCLOSED = "frontmatter_unclosed"
    """A frontmatter block with no closing line: ``line``, ``limit`` (lines searched)."""
    FRONTMATTER_NOT_KEY = "frontmatter_not_key"
    """A frontmatter line that is not ``key: value``: ``line``, ``text`` (its start)."""
    FRONTMATTER_OPEN_LIST = "frontmatter_open_list"
    """A value opening a ``[`` list it does not close: ``line``, ``key``."""
    FRONTMATTER_OPEN_QUOTE = "frontmatter_open_quote"
    """A value opening a quote it does not close: ``line``, ``key``, ``quote``."""
    TOO_LONG = "too_long"
    """A doc over the line cap: ``tier``, ``doc_id``, ``count``, ``limit``."""
    SHIPPED_LINK = "shipped_link"
    """A shipped doc linking an id no shipped doc has: ``doc_id``, ``target``."""
    INDEX_UNREADABLE = "index_unreadable"
    """The local index cannot be read: ``error`` (the DocUnreadable; the shipped index is used)."""
    INDEX_CAP = "index_cap"
    """More index entries than the cap: ``count``, ``limit``."""
    INDEX_SELF = "index_self"
    """An index entry naming the index: ``line``."""
    INDEX_MISSING = "index_missing"
    """An index entry no doc answers: ``line``, ``doc_id``."""
    INDEX_ESCAPES = "index_escapes"
    """An index entry whose doc leads out of its tier: ``line``, ``error`` (the InvalidDocId)."""
    INDEX_BAD_ID = "index_bad_id"
    """An entry line whose id is outside the grammar: ``line``, ``token``."""
    IGNORED_BAD_ID = "ignored_bad_id"
    """An ``ignored:`` name outside the grammar: ``name``."""
    UNSURFACED = "unsurfaced"
    """A local doc the agent is never shown: ``doc_id``, ``entry`` (the line it needs), ``index_path``."""
    DANGLING_LINK = "dangling_link"
    """A local doc linking an id no tier holds: ``doc_id``, ``target``."""
    STALE_HOOK = "stale_hook"
    """An index hook sharing no word with its doc: ``line``, ``doc_id``, ``hook``, ``title``, ``description``."""


@dataclass(frozen=True)
class Finding:
    """One lint finding: what it is about, and its facts (see ``Lint``). A frontmatter finding
    found by ``check`` also names the ``tier``, ``doc_id`` and ``path`` of its file."""

    kind: Lint
    facts: Mapping[str, object] = field(default_factory=dict)


def check(store: DocStore) -> list[Finding]:
    """Problems in both tiers: ids, readability, caps, index entries that do not resolve, shipped links."""
    problems: list[Finding] = []
    readable: dict[str, dict[str, str]] = {"shipped": {}, "local": {}}
    for tier_name, tier in (("shipped", store.shipped_dir), ("local", store.local_dir)):
        for doc_id, path in walk_tier(tier, include_invalid=True):
            if doc_id is None:
                problems.append(Finding(Lint.BAD_NAME, {"tier": tier_name, "path": path}))
                continue
            try:
                text = read_text(path)
            except (OSError, DocUnreadable) as exc:
                problems.append(Finding(Lint.UNREADABLE, {"tier": tier_name, "doc_id": doc_id, "error": exc}))
                continue
            readable[tier_name][doc_id] = text
            problems += [
                Finding(p.kind, {**p.facts, "tier": tier_name, "doc_id": doc_id, "path": path})
                for p in frontmatter_problems(text)
            ]
            lines = line_count(text)
            if lines > BODY_MAX_LINES:
                facts = {"tier": tier_name, "doc_id": doc_id, "count": lines, "limit": BODY_MAX_LINES}
                problems.append(Finding(Lint.TOO_LONG, facts))
    for doc_id, text in sorted(readable["shipped"].items()):
        for target in _LINK.findall(_CODE.sub("", parse(text).body)):
            if target not in readable["shipped"]:
                problems.append(Finding(Lint.SHIPPED_LINK, {"doc_id": doc_id, "target": target}))
    text, note = store.listing.index_text()
    if note:
        problems.append(Finding(Lint.INDEX_UNREADABLE, {"error": note}))
    parsed = index_mod.parse(text)
    if parsed.entry_count > INDEX_MAX_ENTRIES:
        problems.append(Finding(Lint.INDEX_CAP, {"count": parsed.entry_count, "limit": INDEX_MAX_ENTRIES}))
    shipped_ids = set(store.shelf.shipped.files())
    for entry in parsed.entries:
        if entry.collection:
            continue
        if entry.doc_id == INDEX_ID:
            problems.append(Finding(Lint.INDEX_SELF, {"line": entry.line + 1}))
        elif entry.doc_id not in shipped_ids and not store.shelf.local.exists(entry.doc_id):
            problems.append(Finding(Lint.INDEX_MISSING, {"line": entry.line + 1, "doc_id": entry.doc_id}))
        else:
            try:
                store.shelf.local.path(entry.doc_id)
            except InvalidDocId as exc:  # a symlink (file or folder) leading out of the tier
                problems.append(Finding(Lint.INDEX_ESCAPES, {"line": entry.line + 1, "error": exc}))
    for line, token in parsed.bad_entries:
        problems.append(Finding(Lint.INDEX_BAD_ID, {"line": line + 1, "token": token}))
    for name in parsed.ignored:
        if not is_valid_id(name):
            problems.append(Finding(Lint.IGNORED_BAD_ID, {"name": name}))
    return problems


def check_warnings(store: DocStore) -> list[Finding]:
    """What is legal but probably unintended: local docs the agent is never shown, local links
    that land nowhere, and index hooks that no longer match their doc."""
    parsed = index_mod.parse(store.listing.index_text()[0])
    warnings = []
    for doc_id in unsurfaced_ids(parsed, store.shelf.local.ids(), store.shelf.shipped.files()):
        hook = store.shelf.description(store.shelf.local, doc_id) or "<when to use it>"
        entry = index_mod.entry_line(doc_id, hook)
        warnings.append(
            Finding(Lint.UNSURFACED, {"doc_id": doc_id, "entry": entry, "index_path": store.shelf.index_path})
        )
    return warnings + dangling_links(store) + stale_hooks(store, parsed)


def dangling_links(store: DocStore) -> list[Finding]:
    """Links in local docs to ids no tier holds: allowed (a doc the agent means to write), but a
    link the agent follows lands on "unknown id", so each is said once."""
    known = set(store.shelf.shipped.files()) | set(store.shelf.local.ids()) | {INDEX_ID}
    warnings = []
    for doc_id, path in walk_tier(store.local_dir):
        if doc_id is None or doc_id == INDEX_ID:
            continue
        try:
            body = parse(read_text(path)).body
        except (OSError, DocUnreadable):
            continue  # check() reports it
        for target in dict.fromkeys(_LINK.findall(_CODE.sub("", body))):
            if target.split("@", 1)[0] not in known:
                warnings.append(Finding(Lint.DANGLING_LINK, {"doc_id": doc_id, "target": target}))
    return warnings


_WORD = re.compile(r"[a-z0-9]+")
_COMMON = frozenset(
    "about after also asks before both does each from have into just like make more only over some "
    "such than that their them then there these they this those under user very want wants what when "
    "where which while with without your using used".split()
)
"""Words too common to tie an index hook to its doc."""


def _key_words(text: str) -> set[str]:
    """Content words of at least 4 letters, cut to 5 (so 'nuclei' meets 'nucleus', 'segment' meets
    'segmentation')."""
    return {w[:5] for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _COMMON}


def stale_hooks(store: DocStore, index: IndexFile) -> list[Finding]:
    """Index entries whose hook shares no key word with their doc's title and description: the
    doc was probably rewritten under the line, which now leads the agent to it for the old job."""
    warnings = []
    for entry in index.entries:
        hook_words = _key_words(entry.hook) if not entry.collection else set()
        if not hook_words or entry.doc_id == INDEX_ID:
            continue
        try:
            info = store.info(entry.doc_id)
        except BiopbMcpError:
            continue  # a missing or unreadable doc is check()'s problem
        if hook_words & _key_words(f"{info.title} {info.description}"):
            continue
        facts = {
            "line": entry.line + 1,
            "doc_id": entry.doc_id,
            "hook": entry.hook,
            "title": info.title,
            "description": info.description,
        }
        warnings.append(Finding(Lint.STALE_HOOK, facts))
    return warnings


def frontmatter_problems(text: str) -> list[Finding]:
    """What in a doc's frontmatter block the reader will skip or misread, one finding per problem,
    each naming the file line (1-based). A text without frontmatter has none."""
    if not text.startswith("---\n"):
        return []
    lines = text.split("\n")
    end = next(
        (i for i in range(1, min(len(lines), _FRONTMATTER_MAX_LINES + 1)) if lines[i].rstrip() in ("---", "...")), None
    )
    if end is None:
        return [Finding(Lint.FRONTMATTER_UNCLOSED, {"line": 1, "limit": _FRONTMATTER_MAX_LINES})]
    problems: list[Finding] = []
    for no in range(1, end):
        line = lines[no]
        if not line.strip() or line.lstrip().startswith("#") or line.startswith((" ", "\t")):
            continue  # blank, a comment, or the indented items of a block value
        match = _KEY_LINE.match(line)
        if match is None:
            problems.append(Finding(Lint.FRONTMATTER_NOT_KEY, {"line": no + 1, "text": line.strip()[:60]}))
            continue
        key, value = match.group(1), match.group(2).strip()
        if value.startswith("[") and not value.endswith("]"):
            problems.append(Finding(Lint.FRONTMATTER_OPEN_LIST, {"line": no + 1, "key": key}))
        elif value[:1] in ("'", '"') and (len(value) < 2 or value[-1] != value[0]):
            problems.append(Finding(Lint.FRONTMATTER_OPEN_QUOTE, {"line": no + 1, "key": key, "quote": value[0]}))
    return problems


def unsurfaced_ids(index: IndexFile, local_ids: Iterable[str], shipped_ids: Iterable[str]) -> list[str]:
    """Local-only doc ids the agent never sees: no index entry, no collection line covering them.

    Shipped ids are left out (an unlisted one appears in the index's new-docs tail) and so are
    ids on the ``ignored:`` line (hidden on purpose).
    """
    shipped = set(shipped_ids)
    listed = index.entry_ids
    ignored = set(index.ignored)
    collections = [e.doc_id + "/" for e in index.entries if e.collection]
    return sorted(
        doc_id
        for doc_id in local_ids
        if doc_id not in shipped
        and doc_id not in listed
        and doc_id not in ignored
        and doc_id != INDEX_ID
        and not any(doc_id.startswith(c) for c in collections)
    )
