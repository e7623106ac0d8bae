"""How search reads a doc: `##` sections, the literals an agent pastes, and folded text.

Pure text functions shared by the full-text index (what goes into a row) and the search view
(how a query is matched and a snippet cut), so both read a doc the same way.
"""

from __future__ import annotations

import itertools
import re

from biopb_mcp.docs.frontmatter import heading_text

__all__ = ["atoms", "compounds", "fold", "split_sections", "tokenize"]

ATOM = re.compile(r"[^\W_]+")
"""A word: a run of letters and digits. SQLite's unicode61 tokenizer splits text the same way."""

# Runs of word chars and dots: a run that is not plain alphanumeric is a literal an agent pastes
# whole (threshold_otsu, kernel.promote_after, skimage.filters.threshold_otsu), so it is indexed
# whole as well as by its parts.
_RUN = re.compile(r"[\w.]+")
_MARKUP_STARTS = frozenset("#`~ ")
"""First characters of the only lines split_sections must parse: headings and fences."""
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def atoms(text: str) -> list[str]:
    """Lower-cased words of ``text``, in order (`_` and `.` split them)."""
    return ATOM.findall(text.lower())


def compounds(text: str) -> list[str]:
    """Lower-cased `_`/dotted literals of ``text`` whole, plus a dotted one's `_` parts.

    `skimage.filters.threshold_otsu` gives itself and `threshold_otsu`; a word at a sentence's end
    ("done.") is not a compound.
    """
    out: list[str] = []
    # Only runs that are not plain words need a look: filterfalse keeps the loop in C.
    for run in itertools.filterfalse(str.isalnum, _RUN.findall(text.lower())):
        run = run.strip("._")
        if run and not run.isalnum():
            out.append(run)
            if "." in run:
                out.extend(p for p in run.split(".") if "_" in p.strip("_") and p.strip("_"))
    return out


def tokenize(text: str) -> list[str]:
    """Lower-cased search tokens of ``text``: its words, then its `_`/dotted compounds whole."""
    return atoms(text) + compounds(text)


def fold(text: str) -> str:
    """Lower-cased, whitespace runs collapsed: what an exact-phrase test compares."""
    return " ".join(text.lower().split())


def split_sections(doc_id: str, text: str) -> list[tuple[str, str]]:
    """Split a doc into ``(heading, text)`` sections at `##` headings outside code fences.

    Text before the first `##` is the lead section, headed by the doc's title (first H1, else the
    id); an empty lead is dropped. Each later section's text starts with its heading line, so the
    heading's words are searchable too.
    """
    title = ""
    sections: list[tuple[str, list[str]]] = [("", [])]
    fence = ""
    for line in text.splitlines():
        first = line[:1]
        if first not in _MARKUP_STARTS:  # most lines: prose or a list item, nothing to parse
            sections[-1][1].append(line)
            continue
        marker = _FENCE.match(line)
        if marker:
            if not fence:
                fence = marker.group(1)
            elif marker.group(1) == fence:
                fence = ""
        elif not fence:
            h2 = heading_text(line, 2)
            if h2 is not None:
                sections.append((h2, [line]))
                continue
            if not title and len(sections) == 1:
                title = heading_text(line, 1) or ""
        sections[-1][1].append(line)
    out: list[tuple[str, str]] = []
    for index, (heading, lines) in enumerate(sections):
        body = "\n".join(lines)
        if index == 0:
            if not body.strip():
                continue
            heading = title or doc_id
        out.append((heading, body))
    return out
