"""Reading a streamable-HTTP server's start: where it serves and the bearer token it printed, and
whether the token is the one it takes.

The HTTP tests, the soak's HTTP attacks and ``--agent handoff`` all start a real server on port 0
and learn its address and token from its stderr only.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

__all__ = ["started", "token_accepted"]

_SERVING = re.compile(r"serving streamable HTTP at (http://\S+)")
_BEARER = re.compile(r"Bearer ([A-Za-z0-9_\-.~+/=]{16,})")


def started(stderr: str) -> tuple[str, str] | None:
    """(url, token) once the server's stderr holds both its serving line and its bearer token.

    The serving line comes first and the token lines after it, so a reader that stops at the
    serving line can miss the token (under load, many servers starting at once): wait for both.
    The token is read from stderr only; nothing else says which token this server holds.
    """
    serving = _SERVING.search(stderr)
    bearer = _BEARER.search(stderr, serving.end()) if serving else None
    return (serving.group(1), bearer.group(1)) if serving and bearer else None


def token_accepted(url: str, token: str, timeout: float = 10.0) -> bool:
    """Whether the server at ``url`` takes ``token``: a request with it is not refused 401/403.

    The body is no MCP message (the server answers it 400 without a session), so nothing is
    started; only the guard in front of the MCP app judges the token.
    """
    request = urllib.request.Request(
        url,
        data=b"{}",
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    try:
        # no proxy: the server is on loopback, and a proxy from the environment must not answer for it
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout) as reply:
            return reply.status < 400
    except urllib.error.HTTPError as refused:
        return refused.code not in (401, 403)
    except OSError:
        return False
