"""The MCP server: tools, resources and instructions over the kernel host and the docs store.

One concept per module:

* ``app``           build_server: the MCPServer, its middleware (instructions, trace), tools, resources
* ``state``         AppState: what the tools of one server share
* ``tool``          how a function becomes a tool; domain errors become error results
* ``tools_kernel``  the kernel tools (start, execute, poll, interrupt, restart, inspect, status)
* ``kernel_text``   the prose the agent reads over the kernel host's data (states, outcomes, errors)
* ``tools_docs``    the docs tools (read, search, write)
* ``instructions``  the ``initialize`` instructions, composed from the docs store
* ``resources``     the docs as resources: registration and the paged listing
* ``subscriptions`` change notifications to resource subscribers, both protocol eras
* ``stdio``         the stdio wire on private descriptors, and serving over it
* ``http``          loopback HTTP behind a Host/Origin allowlist and a bearer token
* ``http_limits``   per connection: a deadline to read a request, a cap on open connections
* ``run``           the serve entry point and the one exit path (kernel down, cleanup)
* ``sdk``           every private MCP SDK access, with the version it was tested on
"""

from __future__ import annotations

from biopb_mcp.server.app import build_server
from biopb_mcp.server.run import serve
from biopb_mcp.server.state import AppState

__all__ = ["AppState", "build_server", "serve"]
