"""The procedures the index lists, served as MCP prompts (slash commands in Claude Code).

``prompts/list`` and ``prompts/get`` are replaced on the low-level server: the set is not fixed at
start but read from the docs at each request (``biopb_mcp.docs.procedures`` says which docs and
which inputs), so a procedure the lab files in its index is a prompt at the next list. After each
change to the docs the set is compared with the one last computed, and a change is announced as
``notifications/prompts/list_changed`` in both protocol eras (through the resources' notifier,
which knows every legacy session and publishes on the modern bus).

A prompt is named by its doc id made safe for hosts: prompt names should keep to the tool-name
characters (letters, digits, ``_ - .``; hosts build command names from them), and ids also hold
``/``. So ``/`` becomes ``.`` and a ``.`` of the id is doubled; no id segment starts with ``.``,
so a name stands for exactly one id (``lab/positive-cells`` <-> ``lab.positive-cells``): in a run
of k dots, k // 2 are the id's own and an odd one out was a ``/``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    INVALID_PARAMS,
    EmbeddedResource,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel

from biopb_mcp.docs.procedures import Procedure
from biopb_mcp.docs.resources import MIME_TYPE, doc_uri
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocError
from biopb_mcp.server.doc_answers import first_page
from biopb_mcp.server.result_size import ENVELOPE_BYTES, json_size
from biopb_mcp.server.sdk import lowlevel_server
from biopb_mcp.text import prompts as prompt_text
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.docs import FOR_AGENT, refusal

logger = logging.getLogger(__name__)

__all__ = ["MAX_ARGUMENT_CHARS", "ProcedurePrompts", "install_prompts", "prompt_name"]

MAX_ARGUMENT_CHARS = 4096
"""Longest prompt argument value taken (a path, a number): each is quoted in the request."""


def prompt_name(doc_id: str) -> str:
    """The prompt name of a doc id: ``.`` doubled, then ``/`` as ``.``."""
    return doc_id.replace(".", "..").replace("/", ".")


Signature = tuple[tuple[str, str, str | None, tuple[tuple[str, str, bool], ...]], ...]


def _signature(found: Mapping[str, Procedure]) -> Signature:
    """What a client's prompt list shows of a set: a change here is a list change."""
    return tuple(
        (name, p.hook, p.title, tuple((i.name, i.description, i.required) for i in p.inputs))
        for name, p in found.items()
    )


class ProcedurePrompts:
    """The prompt set of one store, read fresh per request; remembers the set it last announced
    (or first served) so each change is announced once, whoever listed prompts meanwhile."""

    def __init__(self, store: DocStore, max_bytes: int = 1_000_000) -> None:
        self.store = store
        self.max_bytes = max_bytes
        """Most bytes one ``prompts/list`` page takes on the wire (``kernel.max_result_bytes``)."""
        self._announced: Signature | None = None
        """The set clients were last told of: the first one served, then each one ``changed`` found.
        Serving a request does not move it, so a list taken between a change and its check
        cannot hide the change from the other sessions."""
        self._lock = threading.Lock()
        self._checking = threading.Lock()  # one check at a time: two cannot both report one change

    def current(self) -> dict[str, Procedure]:
        """Prompt name -> procedure, as the index lists them now (blocking: call off the loop)."""
        found = {prompt_name(p.doc_id): p for p in self.store.procedures()}
        with self._lock:
            if self._announced is None:
                self._announced = _signature(found)
        return found

    def names(self) -> list[str]:
        """The prompt names served now (blocking)."""
        return list(self.current())

    def changed(self) -> bool:
        """Whether the set differs from the one last announced (blocking), and if so, that one is
        now announced; False while none was served yet: no client holds a set that could change."""
        with self._checking:
            with self._lock:
                if self._announced is None:
                    return False
            now = _signature({prompt_name(p.doc_id): p for p in self.store.procedures()})
            with self._lock:
                differs, self._announced = now != self._announced, now
            return differs

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> ListPromptsResult:
        """``prompts/list``: every procedure, in index order, in pages of at most ``max_bytes``.

        Each prompt is bounded (its inputs, names and lines are capped where the doc is read), so
        a page holds many; the cursor is the name of the last prompt on the page, as the
        resources' cursor is a URI: nothing is kept on the server.
        """
        found = await anyio.to_thread.run_sync(self.current)
        names = list(found)
        start = 0
        if params.cursor is not None:
            if params.cursor not in found:
                raise MCPError(code=INVALID_PARAMS, message=prompt_text.stale_cursor(params.cursor))
            start = names.index(params.cursor) + 1
        page: list[Prompt] = []
        size = ENVELOPE_BYTES
        for name in names[start:]:
            prompt = _prompt(name, found[name])
            size += len(prompt.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8")) + 1
            if page and size > self.max_bytes:
                break
            page.append(prompt)
        more = start + len(page) < len(names)
        if more:
            logger.info("prompts/list: a page of %d of %d prompts fits %d bytes", len(page), len(names), self.max_bytes)
        return ListPromptsResult(prompts=page, next_cursor=page[-1].name if more else None)

    async def get_prompt(self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> GetPromptResult:
        """``prompts/get``: the request to follow the procedure, then its doc as an embedded resource."""
        found = await anyio.to_thread.run_sync(self.current)
        procedure = found.get(params.name)
        if procedure is None:
            raise MCPError(code=INVALID_PARAMS, message=prompt_text.unknown_prompt(params.name))
        given = {k: v for k, v in (params.arguments or {}).items() if isinstance(v, str) and v.strip()}
        inputs = [i.name for i in procedure.inputs]
        unknown = [k for k in (params.arguments or {}) if k not in inputs]
        if unknown:
            raise MCPError(code=INVALID_PARAMS, message=prompt_text.unknown_arguments(params.name, unknown, inputs))
        too_long = [k for k, v in given.items() if len(v) > MAX_ARGUMENT_CHARS]
        if too_long:  # echoed in the request: a long one would push the answer past the size bound
            raise MCPError(
                code=INVALID_PARAMS, message=prompt_text.long_arguments(params.name, too_long, MAX_ARGUMENT_CHARS)
            )
        missing = [i.name for i in procedure.inputs if i.required and i.name not in given]
        if missing:
            raise MCPError(code=INVALID_PARAMS, message=prompt_text.missing_arguments(params.name, missing, inputs))
        uri = doc_uri(procedure.doc_id)
        try:
            text = await anyio.to_thread.run_sync(read_doc, self.store, procedure.doc_id, FOR_AGENT)
        except DocError as exc:  # gone or unreadable since the list was read
            raise MCPError(code=INVALID_PARAMS, message=refusal(exc, FOR_AGENT)) from exc
        request = prompt_text.follow_request(procedure, uri, {i: given[i] for i in inputs if i in given})
        text = first_page(text, procedure.doc_id, self.max_bytes, reserved=json_size(request) + len(uri))
        return GetPromptResult(
            description=procedure.hook,
            messages=[
                PromptMessage(role="user", content=TextContent(type="text", text=request)),
                PromptMessage(
                    role="user",
                    content=EmbeddedResource(
                        type="resource", resource=TextResourceContents(uri=uri, mime_type=MIME_TYPE, text=text)
                    ),
                ),
            ],
        )

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Advertise ``prompts.listChanged`` in the handshake era (the SDK says False; this
        server sends it). The modern era derives it from ``subscriptions/listen`` already."""
        result = await call_next(ctx)
        if ctx.method == "initialize":
            _list_changed(result)
        return result


def _list_changed(result: HandlerResult) -> None:
    """Set ``prompts.listChanged`` in an initialize result, when it advertises prompts at all."""
    if isinstance(result, dict):
        prompts = result.get("capabilities", {}).get("prompts")
        if isinstance(prompts, dict):
            prompts["listChanged"] = True
    elif isinstance(result, BaseModel):
        capabilities = getattr(result, "capabilities", None)
        prompts = getattr(capabilities, "prompts", None)
        if prompts is not None:
            prompts.list_changed = True


def _prompt(name: str, procedure: Procedure) -> Prompt:
    return Prompt(
        name=name,
        title=procedure.title,
        description=procedure.hook,
        arguments=[
            PromptArgument(name=i.name, description=i.description, required=i.required) for i in procedure.inputs
        ],
    )


def install_prompts(mcp: MCPServer[Any], store: DocStore, notifier: Any, max_bytes: int) -> ProcedurePrompts:
    """Serve the procedures as prompts on ``mcp``; changes announced through ``notifier``
    (a :class:`~biopb_mcp.server.subscriptions.DocNotifier`); a list page is at most ``max_bytes``."""
    prompts = ProcedurePrompts(store, max_bytes)
    low = lowlevel_server(mcp)
    low.add_request_handler("prompts/list", PaginatedRequestParams, prompts.list_prompts)
    low.add_request_handler("prompts/get", GetPromptRequestParams, prompts.get_prompt)
    mcp.middleware.append(prompts.middleware)
    notifier.prompts_changed = prompts.changed
    return prompts
