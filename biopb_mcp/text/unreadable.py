"""What a reader is told about a doc file that cannot be read: the store's statement of what is
wrong, then what to do about it. The step is the same for an agent and a person at a terminal
(the file is fixed by hand, whoever reads it), so the rendered index, ``docs check`` and every
refusal word it here."""

from __future__ import annotations

from biopb_mcp.errors import DocUnreadable, Unreadable

__all__ = ["unreadable_text"]

_STEP = {
    Unreadable.DIRECTORY: "rename it or remove it",
    Unreadable.NOT_REGULAR: "replace it with a markdown file",
    Unreadable.TOO_BIG: "it is probably not markdown — move it out of the docs folder",
    Unreadable.PERMISSION: "fix its permissions",
    Unreadable.BINARY: "move it out of the docs folder",
    Unreadable.NOT_UTF8: "re-save it as UTF-8",
}


def unreadable_text(exc: DocUnreadable) -> str:
    """The statement with its next step, by ``why``; a case with no step is the statement alone."""
    step = _STEP.get(exc.why)
    return f"{exc}; {step}." if step else str(exc)
