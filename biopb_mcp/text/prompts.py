"""What the procedure prompts say: the request a host puts in the user's turn, and the refusals.

The prompts themselves (which docs, which inputs) are facts from ``biopb_mcp.docs.procedures``;
the server layer (``biopb_mcp.server.prompts``) serves them. Every sentence lives here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from biopb_mcp.docs.procedures import Procedure

__all__ = [
    "follow_request",
    "long_arguments",
    "missing_arguments",
    "stale_cursor",
    "unknown_arguments",
    "unknown_prompt",
    "unknown_template",
]

_NAME_ESCAPE = re.compile(r"\\(?:u[dD][89a-fA-F][0-9a-fA-F]{2}|x[0-9a-fA-F]{2}|[nrt\\])")
"""An escape a shown file name holds (see ``biopb_mcp.fs.names``)."""


def follow_request(procedure: Procedure, uri: str, given: Mapping[str, str]) -> str:
    """The user's request to follow ``procedure`` (its doc is embedded after it) with ``given``."""
    name = procedure.title or procedure.doc_id
    lines = [f'Follow the procedure "{name}" (doc {procedure.doc_id}, {uri}, below) step by step, as written.']
    if given:
        lines += ["", "My inputs:"]
        lines += [f"- {key}: {value}" for key, value in given.items()]
        if any(_NAME_ESCAPE.search(value) for value in given.values()):
            lines += [
                "",
                "A backslash in a value is an escape (\\udcXX for a byte of a file name that is not "
                "UTF-8, \\x1b for a control character): put the value in a quoted, not raw, Python "
                "string as it is, and it names the file.",
            ]
    left = [i.name for i in procedure.inputs if i.name not in given]
    if procedure.inputs_left_out:
        left.append("the further inputs its Inputs section lists (a prompt carries the first few)")
    if left:
        lines += [
            "",
            f"Not given here: {', '.join(left)}. Take each as the doc says (its default, or "
            "measured as it shows), or ask me when it cannot be known from the data.",
        ]
    lines += ["", "Keep its checkpoints: show me what each one shows, and stop where the doc says to stop."]
    return "\n".join(lines)


def unknown_prompt(name: str) -> str:
    """A get or completion for a prompt that is not (or no longer) listed."""
    return (
        f"Unknown prompt: {name}. The prompts are the procedures the doc index lists now; "
        "list them again (prompts/list)."
    )


def missing_arguments(name: str, missing: Sequence[str], inputs: Sequence[str]) -> str:
    """A get without a required argument."""
    noun = "argument" if len(missing) == 1 else "arguments"
    return (
        f"Missing required {noun} {', '.join(repr(m) for m in missing)} for prompt {name}; "
        f"its arguments: {', '.join(inputs)}."
    )


def long_arguments(name: str, names: Sequence[str], limit: int) -> str:
    """A get with an argument value longer than the prompt takes."""
    noun = "argument" if len(names) == 1 else "arguments"
    return (
        f"The {noun} {', '.join(repr(n) for n in names)} of prompt {name} is longer than {limit} characters; "
        "a prompt argument is a short value (a path, a number): give the rest to the agent in the chat."
    )


def unknown_arguments(name: str, unknown: Sequence[str], inputs: Sequence[str]) -> str:
    """A get with an argument the procedure does not take."""
    noun = "argument" if len(unknown) == 1 else "arguments"
    known = ", ".join(inputs) if inputs else "none"
    return f"Unknown {noun} {', '.join(repr(u) for u in unknown)} for prompt {name}; its arguments: {known}."


def stale_cursor(cursor: str) -> str:
    """A prompts/list cursor naming a prompt that is no longer listed."""
    return f"Invalid cursor {cursor[:100]!r}: no such prompt is listed now; list the prompts again from the start."


def unknown_template(uri: str, template: str) -> str:
    """A completion for a resource template this server does not have."""
    return f"No resource template {uri!r} to complete here; the one template is {template}."
