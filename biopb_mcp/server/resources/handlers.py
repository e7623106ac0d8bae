"""The docs as MCP resources: registration, the paged listing, and the subscription hooks.

``install_resources(mcp, store)`` is the whole interface for the app; call it once after
building the ``MCPServer`` and keep the returned ``DocNotifier``. build_server passes nothing
else: the modern-era events go through the server's own subscription bus (the default
``InMemorySubscriptionBus`` ``MCPServer`` creates, or whatever was passed as
``MCPServer(subscriptions=...)``); pass ``bus=`` only to override that. The write_doc tool calls
``await notifier.after_write(result)`` after every successful write.

What it installs (the SDK hooks it needs are private; ``biopb_mcp.server.sdk`` holds them):

* ``biopb://docs/index`` and the one template ``biopb://docs/{+id}``; a read IS
  ``store.read_doc`` (same header, same errors, ``@diff``/``@history``/``@v<N>`` work).
* ``resources/list`` replaced by the paged walk of ``biopb_mcp.docs.resources``.
* ``resources/subscribe``/``unsubscribe`` and the notifier's middleware (see ``subscriptions``).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.to_thread
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.server.subscriptions import SubscriptionBus
from mcp.types import (
    INVALID_PARAMS,
    ListResourcesResult,
    PaginatedRequestParams,
    Resource,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

from biopb_mcp.docs.resources import (
    DOC_URI_TEMPLATE,
    INDEX_DESCRIPTION,
    INDEX_NAME,
    INDEX_URI,
    MIME_TYPE,
    Listing,
)
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocError, DocNotFound, InvalidCursor, InvalidDocId
from biopb_mcp.server.doc_answers import first_page
from biopb_mcp.server.resources.subscriptions import POLL_INTERVAL, DocNotifier
from biopb_mcp.server.sdk import lowlevel_server, subscription_bus
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.docs import FOR_AGENT, refusal
from biopb_mcp.text.failures import for_agent

logger = logging.getLogger(__name__)

__all__ = ["install_resources"]


def install_resources(
    mcp: MCPServer[Any],
    store: DocStore,
    *,
    bus: SubscriptionBus | None = None,
    poll_interval: float = POLL_INTERVAL,
    max_bytes: int = 1_000_000,
) -> DocNotifier:
    """Serve the docs store as resources on ``mcp`` and return the notifier write_doc must call.

    Args:
        mcp: the server; resources, handlers and one middleware are added to it.
        store: the docs store every read and listing goes through.
        bus: the modern-era subscription bus; defaults to the server's own.
        poll_interval: seconds between watcher polls of the local tier.
        max_bytes: the most a read may send (``kernel.max_result_bytes``): a longer doc is cut
            with a note naming read_doc's next page.
    """
    notifier = DocNotifier(store, bus if bus is not None else subscription_bus(mcp), poll_interval=poll_interval)

    def read_index() -> str:
        return first_page(_read(store, "index"), "index", max_bytes)

    def read_doc(id: str) -> str:  # noqa: A002 - the parameter name must equal the template variable
        return first_page(_read(store, id), id, max_bytes)

    mcp.resource(INDEX_URI, name=INDEX_NAME, description=INDEX_DESCRIPTION, mime_type=MIME_TYPE)(read_index)
    # The store is the one gate on ids (grammar, traversal, symlink escape) and its refusals name
    # the fix; the SDK's generic path checks would answer "Unknown resource" before it, so opt out.
    mcp.resource(
        DOC_URI_TEMPLATE,
        name="doc",
        description=(
            "A doc by id, exactly as read_doc returns it (header, then body; a doc longer than one "
            "answer holds is cut with a note naming read_doc's next page). "
            "Views: <id>@diff, <id>@history, <id>@v<N>."
        ),
        mime_type=MIME_TYPE,
        security=ResourceSecurity(exempt_params={"id"}),
    )(read_doc)

    listing = Listing(store)  # one per server: its caches are what keep a page cheap

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> ListResourcesResult:
        try:
            page = await anyio.to_thread.run_sync(listing.page, params.cursor)
        except InvalidCursor as exc:
            raise MCPError(code=INVALID_PARAMS, message=for_agent(exc)) from None
        resources = [
            Resource(uri=e.uri, name=e.name, description=e.description, mime_type=e.mime_type) for e in page.entries
        ]
        return ListResourcesResult(resources=resources, next_cursor=page.next_cursor)

    low = lowlevel_server(mcp)
    low.add_request_handler("resources/list", PaginatedRequestParams, list_resources)
    low.add_request_handler("resources/subscribe", SubscribeRequestParams, notifier.subscribe)
    low.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, notifier.unsubscribe)
    mcp.middleware.append(notifier.middleware)
    return notifier


def _read(store: DocStore, ref: str) -> str:
    """read_doc with the store's refusals mapped to resource errors (-32602 / -32603), worded as read_doc words them."""
    try:
        return read_doc(store, ref, FOR_AGENT)
    except (DocNotFound, InvalidDocId) as exc:
        raise ResourceNotFoundError(refusal(exc, FOR_AGENT)) from exc
    except DocError as exc:  # DocUnreadable and the like: the file exists but cannot be served
        raise ResourceError(refusal(exc, FOR_AGENT)) from exc
