"""The notes on a doc answer cut to fit ``kernel.max_result_bytes``: where it stops, how to read on.

A client drops a message over its size limit whole (the Python SDK's HTTP client refuses an
event over 1 MiB), so a doc answer larger than the bound is sent a page at a time; each note
says which page this is and the call that reads the next.
"""

from __future__ import annotations

__all__ = ["diff_cut_note", "hits_cut_note", "no_such_page", "page_note", "resource_cut_note"]


def _lines(first: int, last: int, total: int) -> str:
    return f"line {first} of {total}" if first == last else f"lines {first}-{last} of {total}"


def page_note(ref: str, number: int, count: int, first: int, last: int, total: int, limit: int) -> str:
    """Under one page of a doc read with read_doc."""
    where = f"page {number} of {count} ({_lines(first, last, total)})"
    step = f'read on with read_doc("{ref}", page={number + 1}).' if number < count else "this is the last page."
    return (
        f"\n[{ref} is longer than one answer holds (kernel.max_result_bytes={limit} bytes): this is {where}; {step}]\n"
    )


def resource_cut_note(ref: str, count: int, last: int, total: int, limit: int) -> str:
    """Under the first page of a doc read as a resource or embedded in a prompt."""
    return (
        f"\n[{ref} is cut here, at line {last} of {total}: the whole is longer than one answer holds "
        f'(kernel.max_result_bytes={limit} bytes). Read the rest with read_doc("{ref}", page=2) '
        f"(pages 2 to {count}).]\n"
    )


def diff_cut_note(doc_id: str, shown: int, total: int, limit: int) -> str:
    """Under a write's diff cut to fit (the write itself succeeded)."""
    return (
        f"\n[The diff is cut here, after line {shown} of {total}: the whole is longer than one answer holds "
        f"(kernel.max_result_bytes={limit} bytes). The write succeeded. Read the doc with "
        f'read_doc("{doc_id}") (page by page), and the text before this write with read_doc("{doc_id}@history").]\n'
    )


def hits_cut_note(shown: int, total: int, limit: int) -> str:
    """Under search hits cut to fit."""
    return (
        f"\n[The hits are cut here, after line {shown} of {total}, to keep the answer under "
        f"kernel.max_result_bytes={limit} bytes; ask for fewer (max_results) or read a hit with read_doc.]\n"
    )


def no_such_page(ref: str, page: int, count: int) -> str:
    """A read_doc page that does not exist."""
    pages = "one page" if count == 1 else f"pages 1 to {count}"
    return f"{ref} has no page {page}: at kernel.max_result_bytes it makes {pages}."
