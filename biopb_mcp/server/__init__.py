"""The MCP server: tools, resources and instructions over the kernel host and the docs store.

The only layer that imports the MCP SDK (and starlette, uvicorn); it adapts the domain
(``biopb_mcp.docs``, ``biopb_mcp.kernel``) and the words (``biopb_mcp.text``) to the protocol.

* ``app``           build_server: the MCPServer, its middleware, tools, resources
* ``state``         AppState: what the tools of one server share
* ``tool``          how a function becomes a tool; domain errors become error results
* ``protocol``      where the SDK's answers differ from the spec, the spec's answer
* ``result_size``   a tool result kept under the size a client accepts
* ``presence``      this server's presence for the %biopb magics, and the scientist's pause
* ``demo``          ``biopb-mcp demo``: a client tour of a real server
* ``trace``, ``logs``  the tool-call trace; the log file and its rate limits
* ``sdk``           every private MCP SDK access, with the version it was tested on
* ``tools/``        kernel (start, execute, poll, interrupt, restart, inspect, status), docs
                    (read, search, write), viewer (look_at_viewer)
* ``resources/``    the docs as resources (handlers) and change notifications (subscriptions)
* ``transports/``   serve (the dispatcher), exit (the one way out), stdio, http, http_limits
"""

from __future__ import annotations

from biopb_mcp.server.app import build_server
from biopb_mcp.server.state import AppState
from biopb_mcp.server.transports.serve import serve

__all__ = ["AppState", "build_server", "serve"]
