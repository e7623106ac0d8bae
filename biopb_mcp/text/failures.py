"""Any anticipated failure in the words of its reader: the agent (tool calls) or a person at a
terminal (commands).

The server's tool, resource and prompt errors and the CLI's ``error:`` line all come through here,
so each kind of error is worded in one place: the docs store's refusals and the kernel's failures
from their kinds and fields, the rest (a config file, the SDK) as their message states them.
"""

from __future__ import annotations

from biopb_mcp.errors import BiopbMcpError, DocError, KernelError
from biopb_mcp.text import kernel as kernel_text
from biopb_mcp.text.docs import FOR_AGENT, FOR_TERMINAL, refusal

__all__ = ["for_agent", "for_terminal"]


def for_agent(exc: BiopbMcpError) -> str:
    """The failure as the agent reads it, with the next tool call in it."""
    if isinstance(exc, KernelError):
        return kernel_text.error_text(exc)
    if isinstance(exc, DocError):
        return refusal(exc, FOR_AGENT)
    return str(exc)


def for_terminal(exc: BiopbMcpError) -> str:
    """The failure as a person at a terminal reads it, with the command to type in it.

    A kernel error reaches the terminal only from the console command, whose errors name no tool.
    """
    if isinstance(exc, DocError):
        return refusal(exc, FOR_TERMINAL)
    return str(exc)
