"""Lint rules for hand-edited docs: frontmatter that will not read as written, docs nobody sees,
links that land nowhere, index hooks left behind by a rewrite.

The reader is tolerant on purpose (a bad frontmatter line is skipped, never fatal), so a typo
would otherwise pass silently; ``biopb-mcp docs check`` runs these rules to say where it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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

__all__ = ["check", "check_warnings", "dangling_links", "frontmatter_problems", "stale_hooks", "unsurfaced_ids"]

_LINK = re.compile(r"\[\[([^\[\]\s|#]+)\]\]")  # "[" excluded: a run of "[[[[" stays linear
_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|`[^`\n]*`", re.DOTALL | re.MULTILINE)
"""Fenced blocks and inline code spans: a `[[x]]` quoted there is an example, not a link."""


def check(store: DocStore) -> list[str]:
    """Problems in both tiers: ids, readability, caps, index entries that do not resolve, shipped links."""
    problems: list[str] = []
    readable: dict[str, dict[str, str]] = {"shipped": {}, "local": {}}
    for tier_name, tier in (("shipped", store.shipped_dir), ("local", store.local_dir)):
        for doc_id, path in walk_tier(tier, include_invalid=True):
            if doc_id is None:
                problems.append(
                    f"{tier_name}: {path} has a name outside the id grammar, so no id reaches it; rename it."
                )
                continue
            try:
                text = read_text(path)
            except (OSError, DocUnreadable) as exc:
                problems.append(f"{tier_name}: {doc_id}: {exc}")
                continue
            readable[tier_name][doc_id] = text
            problems += [f"{tier_name}: {doc_id}: {path}: {p}" for p in frontmatter_problems(text)]
            lines = line_count(text)
            if lines > BODY_MAX_LINES:
                problems.append(f"{tier_name}: {doc_id} has {lines} lines; the cap is {BODY_MAX_LINES}.")
    for doc_id, text in sorted(readable["shipped"].items()):
        for target in _LINK.findall(_CODE.sub("", parse(text).body)):
            if target not in readable["shipped"]:
                problems.append(f"shipped: {doc_id} links [[{target}]], which is not a shipped doc.")
    text, note = store.listing.index_text()
    if note:
        problems.append(f"local: index: {note.lstrip('> ')}")
    parsed = index_mod.parse(text)
    if parsed.entry_count > INDEX_MAX_ENTRIES:
        problems.append(f"index: {parsed.entry_count} entries; the cap is {INDEX_MAX_ENTRIES}.")
    shipped_ids = set(store.shelf.shipped.files())
    for entry in parsed.entries:
        if entry.collection:
            continue
        if entry.doc_id == INDEX_ID:
            problems.append(f"index line {entry.line + 1}: 'index' is the index itself, not a doc; remove the line.")
        elif entry.doc_id not in shipped_ids and not store.shelf.local.exists(entry.doc_id):
            problems.append(f"index line {entry.line + 1}: {entry.doc_id!r} resolves to no doc (missing).")
        else:
            try:
                store.shelf.local.path(entry.doc_id)
            except InvalidDocId as exc:  # a symlink (file or folder) leading out of the tier
                problems.append(f"index line {entry.line + 1}: {exc}")
    for line, token in parsed.bad_entries:
        problems.append(f"index line {line + 1}: {token!r} is not a valid id, so the line is not read as an entry.")
    for name in parsed.ignored:
        if not is_valid_id(name):
            problems.append(f"index: ignored: names {name!r}, which is not a valid id.")
    return problems


def check_warnings(store: DocStore) -> list[str]:
    """What is legal but probably unintended: local docs the agent is never shown, local links
    that land nowhere, and index hooks that no longer match their doc."""
    parsed = index_mod.parse(store.listing.index_text()[0])
    warnings = []
    for doc_id in unsurfaced_ids(parsed, store.shelf.local.ids(), store.shelf.shipped.files()):
        hook = store.shelf.description(store.shelf.local, doc_id) or "<when to use it>"
        warnings.append(
            f"local: {doc_id} is in no index entry, so the agent is never shown it; add the line "
            f"'{index_mod.entry_line(doc_id, hook)}' to {store.shelf.index_path}, or its id to the "
            "ignored: line to hide it on purpose."
        )
    return warnings + dangling_links(store) + stale_hooks(store, parsed)


def dangling_links(store: DocStore) -> list[str]:
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
                warnings.append(
                    f"local: {doc_id} links [[{target}]], which is no doc in either tier; "
                    f"write {target}, or fix the link (a dangling link is allowed)."
                )
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


def stale_hooks(store: DocStore, index: IndexFile) -> list[str]:
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
        warnings.append(
            f"index line {entry.line + 1}: the hook of {entry.doc_id} ({entry.hook!r}) shares no word with "
            f"the doc's title and description ({info.title!r}: {info.description!r}); if the doc was "
            "rewritten, update the line to say when to use it now."
        )
    return warnings


def frontmatter_problems(text: str) -> list[str]:
    """What in a doc's frontmatter block the reader will skip or misread, one line per problem.

    Each message names the file line (1-based) and what to fix. A text without frontmatter
    has none.
    """
    if not text.startswith("---\n"):
        return []
    lines = text.split("\n")
    end = next(
        (i for i in range(1, min(len(lines), _FRONTMATTER_MAX_LINES + 1)) if lines[i].rstrip() in ("---", "...")), None
    )
    if end is None:
        return [
            (
                f"line 1: the frontmatter block opened by '---' is never closed (no '---' line within "
                f"{_FRONTMATTER_MAX_LINES} lines), so it is read as body text; add the closing '---'."
            )
        ]
    problems: list[str] = []
    for no in range(1, end):
        line = lines[no]
        if not line.strip() or line.lstrip().startswith("#") or line.startswith((" ", "\t")):
            continue  # blank, a comment, or the indented items of a block value
        match = _KEY_LINE.match(line)
        if match is None:
            problems.append(
                f"line {no + 1}: {line.strip()[:60]!r} is not 'key: value', so it is ignored; fix or remove it."
            )
            continue
        key, value = match.group(1), match.group(2).strip()
        if value.startswith("[") and not value.endswith("]"):
            problems.append(
                f"line {no + 1}: {key}: opens a '[' list that is not closed on the same "
                "line, so the value is read as plain text; close it with ']'."
            )
        elif value[:1] in ("'", '"') and (len(value) < 2 or value[-1] != value[0]):
            problems.append(
                f"line {no + 1}: {key}: opens a {value[0]} quote that is not closed, so "
                f"the quote is kept in the value; close it with {value[0]}."
            )
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
