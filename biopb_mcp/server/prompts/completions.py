"""``completion/complete``: doc ids for the docs template, files for a prompt's file arguments.

* ``biopb://docs/{+id}``, argument ``id``: ids that start with what was typed, in the order a
  reader wants them: ``index``, the docs the index lists (in its order), the others it surfaces
  (the New-shipped tail, docs under a listed folder), then every other doc readable by id
  (unlisted local docs, banked ones), sorted. Ignored ids are never offered: ignoring a doc is
  the index's choice not to show it (and the bench's docs-off arm hides its procedures so).
* A procedure prompt's argument that names a file (``Input.file``): the files of the agent's
  working directory, which is the kernel's when one runs (asked through the kernel host, and
  remembered for when the kernel is busy), else the server's own. A kernel on another machine
  has its files there: none are offered.

At most 100 values per answer, with ``total`` and ``hasMore`` saying how many matched. Any other
argument completes to nothing; an unknown prompt or resource is -32602.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    INVALID_PARAMS,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    PromptReference,
    ResourceTemplateReference,
)

from biopb_mcp.docs.resources import DOC_URI_TEMPLATE
from biopb_mcp.docs.store import DocStore
from biopb_mcp.fs.workdir import MAX_MATCHES, Matches, matching_paths
from biopb_mcp.kernel import KernelHost
from biopb_mcp.kernel.states import KernelState
from biopb_mcp.server.prompts.handlers import ProcedurePrompts
from biopb_mcp.server.sdk import lowlevel_server
from biopb_mcp.text import prompts as prompt_text

__all__ = ["WORKDIR_EXPRESSION", "Completions", "doc_id_matches", "install_completions"]

WORKDIR_EXPRESSION = "__import__('json').dumps([__import__('os').getcwd(), __import__('socket').gethostname()])"
"""Evaluated in an idle kernel (a user expression: no history, no output): its working directory
and the machine it runs on."""

DOC_ID_ARGUMENT = "id"
"""The docs template's one variable."""


def doc_id_matches(store: DocStore, typed: str, limit: int = MAX_MATCHES) -> Matches:
    """Doc ids starting with ``typed``, in reading order (see the module docstring)."""
    found = [doc_id for doc_id in store.visibility().reading_order() if doc_id.startswith(typed)]
    return Matches(found[:limit], len(found))


class Completions:
    """Answers ``completion/complete`` for one server: its store, its prompts, its kernel."""

    def __init__(self, store: DocStore, prompts: ProcedurePrompts, kernel: KernelHost) -> None:
        self.store = store
        self.prompts = prompts
        self.kernel = kernel
        self._kernel_dir: tuple[str, str] | None = None  # (cwd, host) the kernel said last
        self._lock = threading.Lock()

    def workdir(self) -> Path | None:
        """The agent's working directory here, or None when its kernel runs on another machine."""
        if self.kernel.state is not KernelState.READY:
            return Path(os.getcwd())
        answer = self.kernel.probes.query_when_idle(WORKDIR_EXPRESSION)
        with self._lock:
            if isinstance(answer, list) and len(answer) == 2 and all(isinstance(x, str) for x in answer):
                self._kernel_dir = (answer[0], answer[1])
            known = self._kernel_dir  # a busy kernel answers nothing: where it was last
        if known is None:
            return Path(os.getcwd())  # a kernel this server started starts in its directory
        cwd, host = known
        return Path(cwd) if host == socket.gethostname() else None

    def _files(self, typed: str) -> Matches:
        root = self.workdir()
        return matching_paths(root, typed) if root is not None else Matches([], 0)

    def _prompt_argument(self, name: str, argument: str, typed: str) -> Matches:
        procedure = self.prompts.current().get(name)
        if procedure is None:
            raise MCPError(code=INVALID_PARAMS, message=prompt_text.unknown_prompt(name))
        wanted = next((i for i in procedure.inputs if i.name == argument), None)
        return self._files(typed) if wanted is not None and wanted.file else Matches([], 0)

    async def complete(self, ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams) -> CompleteResult:
        ref, argument = params.ref, params.argument
        if isinstance(ref, PromptReference):
            found = await anyio.to_thread.run_sync(self._prompt_argument, ref.name, argument.name, argument.value)
        elif isinstance(ref, ResourceTemplateReference) and ref.uri == DOC_URI_TEMPLATE:
            found = Matches([], 0)
            if argument.name == DOC_ID_ARGUMENT:
                found = await anyio.to_thread.run_sync(doc_id_matches, self.store, argument.value)
        else:
            raise MCPError(
                code=INVALID_PARAMS,
                message=prompt_text.unknown_template(str(getattr(ref, "uri", ref)), DOC_URI_TEMPLATE),
            )
        return CompleteResult(
            completion=Completion(values=found.values, total=found.total, has_more=found.total > len(found.values))
        )


def install_completions(
    mcp: MCPServer[Any], store: DocStore, prompts: ProcedurePrompts, kernel: KernelHost
) -> Completions:
    """Serve ``completion/complete`` on ``mcp`` (which advertises the ``completions`` capability)."""
    completions = Completions(store, prompts, kernel)
    lowlevel_server(mcp).add_request_handler("completion/complete", CompleteRequestParams, completions.complete)
    return completions
