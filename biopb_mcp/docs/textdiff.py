"""Text comparisons for edits: counting an exact match, counting lines, a trimmed unified diff."""

from __future__ import annotations

import difflib
import re

__all__ = ["line_count", "matches", "unified_diff"]

CONTEXT = 3
"""Unchanged lines shown around each hunk."""

_HUNK = re.compile(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def matches(text: str, sub: str) -> tuple[int, bool]:
    """How many times `sub` is in `text`, for an old/new replace that must be unambiguous.

    Returns (non-overlapping count, whether two matches overlap). Overlaps count as ambiguous
    ("aa" is in "aaa" at two places, which str.count calls one). Never walks every overlapping
    match: a long `old` that matches at many overlapping places in a long doc made that
    O(len(doc) x len(old)) under the tier lock, minutes for a 10 KB `old` in a 1 MB doc.
    """
    first = text.find(sub)
    if first == -1:
        return 0, False
    count = text.count(sub)
    if count > 1:
        return count, False
    return 1, text.find(sub, first + 1) != -1


def line_count(text: str) -> int:
    """Lines as an editor counts them: newline-separated (str.splitlines also breaks at a form feed, U+2028, …)."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """difflib's unified diff, run only over the span that differs (plus context).

    Trimming the common head and tail first gives the same hunks but keeps a one-line edit of a
    long doc with repetitive lines from costing difflib's quadratic matching.
    """
    a, b = before.splitlines(), after.splitlines()
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = max(0, head - CONTEXT)
    keep_tail = max(0, tail - CONTEXT)
    a_part, b_part = a[start : len(a) - keep_tail], b[start : len(b) - keep_tail]
    out = []
    for line in difflib.unified_diff(a_part, b_part, before_name, after_name, lineterm="", n=CONTEXT):
        hunk = _HUNK.match(line)
        if hunk and start:
            line = _shift_hunk(hunk, start)
        out.append(line)
    return "\n".join(out)


def _shift_hunk(hunk: re.Match[str], offset: int) -> str:
    """Renumber a hunk header produced for a slice that starts `offset` lines into the file."""
    a_start, a_len, b_start, b_len = hunk.group(1), hunk.group(2) or "", hunk.group(3), hunk.group(4) or ""
    # difflib writes start 0 only for an empty range, whose number is the line before it.
    return f"@@ -{int(a_start) + offset}{a_len} +{int(b_start) + offset}{b_len} @@"
