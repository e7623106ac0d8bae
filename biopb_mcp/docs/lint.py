"""Lint rules for hand-edited docs: frontmatter that will not read as written, docs nobody sees.

The reader is tolerant on purpose (a bad frontmatter line is skipped, never fatal), so a typo
would otherwise pass silently; ``biopb-mcp docs check`` runs these rules to say where it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from biopb_mcp.docs.frontmatter import _FRONTMATTER_MAX_LINES, _KEY_LINE  # what the reader accepts
from biopb_mcp.docs.index import IndexFile

__all__ = ["frontmatter_problems", "unsurfaced_ids"]



def frontmatter_problems(text: str) -> list[str]:
    """What in a doc's frontmatter block the reader will skip or misread, one line per problem.

    Each message names the file line (1-based) and what to fix. A text without frontmatter
    has none.
    """
    if not text.startswith("---\n"):
        return []
    lines = text.split("\n")
    end = next((i for i in range(1, min(len(lines), _FRONTMATTER_MAX_LINES + 1))
                if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        return [(f"line 1: the frontmatter block opened by '---' is never closed (no '---' line within "
                 f"{_FRONTMATTER_MAX_LINES} lines), so it is read as body text; add the closing '---'.")]
    problems: list[str] = []
    for no in range(1, end):
        line = lines[no]
        if not line.strip() or line.lstrip().startswith("#") or line.startswith((" ", "\t")):
            continue  # blank, a comment, or the indented items of a block value
        match = _KEY_LINE.match(line)
        if match is None:
            problems.append(f"line {no + 1}: {line.strip()[:60]!r} is not 'key: value', so it is "
                            "ignored; fix or remove it.")
            continue
        key, value = match.group(1), match.group(2).strip()
        if value.startswith("[") and not value.endswith("]"):
            problems.append(f"line {no + 1}: {key}: opens a '[' list that is not closed on the same "
                            "line, so the value is read as plain text; close it with ']'.")
        elif value[:1] in ("'", '"') and (len(value) < 2 or value[-1] != value[0]):
            problems.append(f"line {no + 1}: {key}: opens a {value[0]} quote that is not closed, so "
                            f"the quote is kept in the value; close it with {value[0]}.")
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
        doc_id for doc_id in local_ids
        if doc_id not in shipped and doc_id not in listed and doc_id not in ignored
        and doc_id != "index" and not any(doc_id.startswith(c) for c in collections)
    )
