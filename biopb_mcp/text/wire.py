"""What a client reads when an answer could not be sent as it was: the error standing in for it."""

from __future__ import annotations

__all__ = ["unencodable_message", "unsendable_answer"]


def unsendable_answer(method: str, where: str, char: str) -> str:
    """The error for an answer that held a lone surrogate (text no UTF-8 message can carry)."""
    return (
        f"The answer to {method} could not be sent: at {where} it held {char!r}, text that is not valid "
        "Unicode (most often a file name that is not valid UTF-8). Nothing else failed and the session "
        "goes on; ask for something narrower, or rename the file."
    )


def unencodable_message(reason: str) -> str:
    """The error for an answer the transport could not encode."""
    return f"The answer could not be encoded for sending ({reason}). Nothing else failed and the session goes on."
