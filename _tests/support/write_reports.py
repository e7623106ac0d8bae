"""A store write seen as the agent reads it: the result's fields plus the worded report."""

from __future__ import annotations

from dataclasses import dataclass

from biopb_mcp.docs.writes import WriteResult
from biopb_mcp.text.docs import FOR_AGENT, write_report


@dataclass(frozen=True)
class Reported:
    """A WriteResult's flags and the text the write_doc tool answers with."""

    doc_id: str
    created: bool
    changed: bool
    text: str


def as_agent_reads(result: WriteResult) -> Reported:
    """The write as the agent is told of it."""
    return Reported(result.doc_id, result.created, result.changed, write_report(result, FOR_AGENT))
