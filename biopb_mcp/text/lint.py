"""What ``biopb-mcp docs check`` prints for each lint finding: where it is, what is wrong, and what
to do about it, written from the finding's kind and facts (``biopb_mcp.docs.lint``)."""

from __future__ import annotations

from biopb_mcp.docs.lint import Finding, Lint
from biopb_mcp.errors import DocError
from biopb_mcp.text.docs import FOR_TERMINAL, refusal

__all__ = ["finding_text"]

_FRONTMATTER = (
    Lint.FRONTMATTER_UNCLOSED,
    Lint.FRONTMATTER_NOT_KEY,
    Lint.FRONTMATTER_OPEN_LIST,
    Lint.FRONTMATTER_OPEN_QUOTE,
)


def finding_text(finding: Finding) -> str:
    """The finding as one line (a warning's ``warning:`` lead is the command's)."""
    kind, facts = finding.kind, finding.facts
    if kind in _FRONTMATTER:
        where = f"{facts['tier']}: {facts['doc_id']}: {facts['path']}: " if "path" in facts else ""
        return where + _frontmatter(finding)
    if kind is Lint.BAD_NAME:
        return f"{facts['tier']}: {facts['path']} has a name outside the id grammar, so no id reaches it; rename it."
    if kind is Lint.UNREADABLE:
        return f"{facts['tier']}: {facts['doc_id']}: {_error(facts['error'])}"
    if kind is Lint.TOO_LONG:
        return f"{facts['tier']}: {facts['doc_id']} has {facts['count']} lines; the cap is {facts['limit']}."
    if kind is Lint.SHIPPED_LINK:
        return f"shipped: {facts['doc_id']} links [[{facts['target']}]], which is not a shipped doc."
    if kind is Lint.INDEX_UNREADABLE:
        return f"local: index: {_error(facts['error'])}"
    if kind is Lint.INDEX_CAP:
        return f"index: {facts['count']} entries; the cap is {facts['limit']}."
    if kind is Lint.INDEX_SELF:
        return f"index line {facts['line']}: 'index' is the index itself, not a doc; remove the line."
    if kind is Lint.INDEX_MISSING:
        return f"index line {facts['line']}: {facts['doc_id']!r} resolves to no doc (missing)."
    if kind is Lint.INDEX_ESCAPES:
        return f"index line {facts['line']}: {_error(facts['error'])}"
    if kind is Lint.INDEX_BAD_ID:
        return f"index line {facts['line']}: {facts['token']!r} is not a valid id, so the line is not read as an entry."
    if kind is Lint.IGNORED_BAD_ID:
        return f"index: ignored: names {facts['name']!r}, which is not a valid id."
    if kind is Lint.UNSURFACED:
        return (
            f"local: {facts['doc_id']} is in no index entry, so the agent is never shown it; add the line "
            f"'{facts['entry']}' to {facts['index_path']}, or its id to the ignored: line to hide it on purpose."
        )
    if kind is Lint.DANGLING_LINK:
        target = facts["target"]
        return (
            f"local: {facts['doc_id']} links [[{target}]], which is no doc in either tier; write {target}, or fix "
            "the link (a dangling link is allowed)."
        )
    # Lint.STALE_HOOK
    return (
        f"index line {facts['line']}: the hook of {facts['doc_id']} ({facts['hook']!r}) shares no word with the "
        f"doc's title and description ({facts['title']!r}: {facts['description']!r}); if the doc was rewritten, "
        "update the line to say when to use it now."
    )


def _frontmatter(finding: Finding) -> str:
    """A frontmatter problem: its file line, what the reader does with it, and the fix."""
    kind, facts = finding.kind, finding.facts
    line = facts["line"]
    if kind is Lint.FRONTMATTER_UNCLOSED:
        return (
            f"line {line}: the frontmatter block opened by '---' is never closed (no '---' line within "
            f"{facts['limit']} lines), so it is read as body text; add the closing '---'."
        )
    if kind is Lint.FRONTMATTER_NOT_KEY:
        return f"line {line}: {facts['text']!r} is not 'key: value', so it is ignored; fix or remove it."
    if kind is Lint.FRONTMATTER_OPEN_LIST:
        return (
            f"line {line}: {facts['key']}: opens a '[' list that is not closed on the same line, so the value is "
            "read as plain text; close it with ']'."
        )
    quote = facts["quote"]
    return (
        f"line {line}: {facts['key']}: opens a {quote} quote that is not closed, so the quote is kept in the "
        f"value; close it with {quote}."
    )


def _error(error: object) -> str:
    """A file error met by the lint, in the terminal's words (the one route for a docs refusal)."""
    return refusal(error, FOR_TERMINAL) if isinstance(error, DocError) else str(error)
