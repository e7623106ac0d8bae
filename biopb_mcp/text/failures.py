"""Any anticipated failure in the words of its reader: the agent (tool calls) or a person at a
terminal (commands).

The server's tool, resource and prompt errors and the CLI's ``error:`` line all come through here,
so each kind of error is worded in one place: the docs store's refusals, the kernel's failures, a
config file's problems, an SDK without the hooks the server needs and a runtime dir that is not
private, from their kinds and fields.
"""

from __future__ import annotations

from biopb_mcp.errors import BiopbMcpError, ConfigError, DocError, KernelError, SdkMismatch, UnsafeRuntimeDir
from biopb_mcp.text import kernel as kernel_text
from biopb_mcp.text.config import config_refusal, unsafe_runtime_dir
from biopb_mcp.text.docs import FOR_AGENT, FOR_TERMINAL, refusal

__all__ = ["for_agent", "for_terminal"]


def for_agent(exc: BiopbMcpError) -> str:
    """The failure as the agent reads it, with the next tool call in it."""
    if isinstance(exc, KernelError):
        return kernel_text.error_text(exc)
    if isinstance(exc, DocError):
        return refusal(exc, FOR_AGENT)
    if isinstance(exc, ConfigError):
        return config_refusal(exc)
    if isinstance(exc, SdkMismatch):
        return _sdk_refusal(exc)
    if isinstance(exc, UnsafeRuntimeDir):
        return unsafe_runtime_dir(exc)
    return str(exc)


def for_terminal(exc: BiopbMcpError) -> str:
    """The failure as a person at a terminal reads it, with the command to type in it.

    A kernel error reaches the terminal only from the console command, whose errors name no tool.
    """
    if isinstance(exc, KernelError):
        return kernel_text.console_refusal(exc)
    if isinstance(exc, DocError):
        return refusal(exc, FOR_TERMINAL)
    if isinstance(exc, ConfigError):
        return config_refusal(exc)
    if isinstance(exc, SdkMismatch):
        return _sdk_refusal(exc)
    if isinstance(exc, UnsafeRuntimeDir):
        return unsafe_runtime_dir(exc)
    return str(exc)


def _sdk_refusal(exc: SdkMismatch) -> str:
    """The missing hooks, and the SDK versions to install instead (raised as a server is built,
    before any client connects: a person at a terminal reads it)."""
    return f"{exc}; install mcp{exc.tested}" if exc.tested else str(exc)
