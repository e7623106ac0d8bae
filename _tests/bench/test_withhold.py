"""The docs-off arm hides the procedures for real: on an ablated tree no tool, resource, listing,
suggestion or link names or serves a withheld procedure, through a real MCP client session on the
real server (and a real kernel); a run whose code opens the package's docs folder is flagged."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.types import CallToolResult, ResourceTemplateReference, TextContent, TextResourceContents

from _tests.support.prepared_trees import prepare_tree, shipped_index_path
from bench.run import contamination
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.index import parse as parse_index
from biopb_mcp.docs.shelf import WITHHELD_LINK
from biopb_mcp.docs.store import DocStore
from biopb_mcp.server import build_server
from biopb_mcp.text.index import render_index

pytestmark = pytest.mark.anyio

SEED = parse_index(shipped_index_path().read_text(encoding="utf-8"))
SHIPPED = shipped_index_path().parent


_CLOSEST = re.compile(r" Closest: [^.]*\.")


def _mentions(text: str, doc_id: str) -> bool:
    return re.search(rf"(?<![\w/-]){re.escape(doc_id)}(?![\w/-])", text) is not None


def _titles(withheld: list[str]) -> dict[str, str]:
    """Each withheld procedure's first heading: text that only its own file holds."""
    found = {}
    for doc_id in withheld:
        text = (SHIPPED / f"{doc_id}.md").read_text(encoding="utf-8")
        found[doc_id] = next(line for line in text.splitlines() if line.startswith("# "))
    return found


def _text(result: CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


class Seen:
    """Everything the server said in the session, checked at the end for any withheld id."""

    def __init__(self, withheld: list[str]) -> None:
        self.withheld = withheld
        self.titles = _titles(withheld)
        self.said: list[tuple[str, str]] = []

    def add(self, what: str, text: str) -> str:
        self.said.append((what, text))
        return text

    def leaks(self) -> list[str]:
        """Withheld ids and titles in what the server said; an answer may echo what it was asked."""
        found = []
        for what, text in self.said:
            found += [
                f"{what}: names {doc_id}"
                for doc_id in self.withheld
                if _mentions(text, doc_id) and not _mentions(what, doc_id)
            ]
            found += [f"{what}: quotes {title!r}" for title in self.titles.values() if title in text]
        return found


@pytest.fixture
def ablated(tmp_path: Path) -> Any:
    tree = prepare_tree(tmp_path / "tree", bench_docs=False)
    settings = load_settings(tree.root)
    settings = replace(settings, kernel=replace(settings.kernel, promote_after=300.0))
    mcp, state = build_server(settings, trace=tmp_path / "trace.jsonl")
    yield tree, mcp, state, tmp_path / "trace.jsonl"
    state.kernel.shutdown()


async def test_no_tool_resource_or_listing_reveals_a_withheld_procedure(ablated: Any) -> None:
    tree, mcp, _, trace = ablated
    withheld = tree.withheld
    assert len(withheld) >= 10 and "large-image" in withheld  # a reference links this one
    seen = Seen(withheld)
    with anyio.fail_after(120):
        async with Client(mcp) as client:
            seen.add("instructions", client.instructions or "")
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            seen.add("tools/list", json.dumps([tool.model_dump(mode="json") for tool in tools.values()]))

            async def call(name: str, **arguments: Any) -> CallToolResult:
                result = await client.call_tool(name, arguments)
                seen.add(f"{name}({arguments})", _text(result))
                return result

            # the docs tools, every way a doc can be reached
            index = _text(await call("read_doc", id="index"))
            assert "## References" in index
            await call("read_doc", id="index@diff")
            unknown = _text(await call("read_doc", id="no-such-doc-here"))
            for doc_id in withheld:
                for view in ("", "@diff", "@history", "@v1"):
                    result = await call("read_doc", id=doc_id + view)
                    assert result.is_error, doc_id + view
                refusal = _text(await call("read_doc", id=doc_id))
                # as for any unknown id (its closest ids depend on the spelling, and name no withheld one)
                assert _CLOSEST.sub("", refusal) == _CLOSEST.sub("", unknown).replace("no-such-doc-here", doc_id)
                await call("read_doc", id=doc_id[:-1])  # a near miss: its suggestions name no withheld id
                edit = await call("write_doc", id=doc_id, old="#", new="##")
                assert edit.is_error
            references = [e.doc_id for e in SEED.entries if e.doc_id not in withheld]
            for doc_id in references:
                assert not (await call("read_doc", id=doc_id)).is_error
            assert WITHHELD_LINK in _text(await call("read_doc", id="kernel"))  # the link to large-image
            words: set[str] = set()
            for doc_id in withheld:
                words.update(doc_id.split("-"))
                words.update(re.findall(r"[a-z]{4,}", seen.titles[doc_id].lower()))
            for word in sorted(words) + withheld + ["procedure", "large image memory chunk"]:
                await call("search_docs", query=word, max_results=50)
            await call("server_status")
            # the kernel tools, and the code a run executes
            await call("start_kernel")
            await call("execute_code", code="x = 1\nprint(x)")
            await call("inspect_object", path="x")
            await call("poll_job", job_id="no-such-job")
            await call("interrupt_kernel")
            for name in sorted(
                set(tools)
                - {
                    "read_doc",
                    "write_doc",
                    "search_docs",
                    "server_status",
                    "start_kernel",
                    "execute_code",
                    "inspect_object",
                    "poll_job",
                    "interrupt_kernel",
                    "restart_kernel",
                }
            ):
                await call(name)  # a tool added later is called too, and must reveal nothing either
            # resources: every page of the listing, every listed resource, the template, a direct read
            uris: list[str] = []
            cursor: str | None = None
            while True:
                page = await client.list_resources(cursor=cursor)
                seen.add("resources/list", page.model_dump_json())
                uris += [str(resource.uri) for resource in page.resources]
                cursor = page.next_cursor
                if cursor is None:
                    break
            seen.add("resources/templates/list", (await client.list_resource_templates()).model_dump_json())
            for uri in uris:
                contents = (await client.read_resource(uri)).contents
                seen.add(uri, "".join(c.text for c in contents if isinstance(c, TextResourceContents)))
            for doc_id in withheld:
                with pytest.raises(MCPError):
                    await client.read_resource(f"biopb://docs/{doc_id}")
            capabilities = client.server_capabilities
            if capabilities is not None and capabilities.prompts is not None:
                seen.add("prompts/list", (await client.list_prompts()).model_dump_json())
            if capabilities is not None and capabilities.completions is not None:
                template = ResourceTemplateReference(type="ref/resource", uri="biopb://docs/{+id}")
                for prefix in ["", *sorted({doc_id[:2] for doc_id in withheld})]:
                    done = await client.complete(template, {"name": "id", "value": prefix})
                    seen.add(f"completion/complete {prefix!r}", done.model_dump_json())
            # the agent's own doc under a withheld id is its own: no shipped text comes with it
            mine = _text(await call("write_doc", id=withheld[0], body="# Mine\n\nMy own notes.\n"))
            assert "Created local doc" in mine and "/dev/null" in mine
    assert uris and not [uri for uri in uris if uri.removeprefix("biopb://docs/") in withheld]
    assert seen.leaks() == []
    assert contamination(tree, trace) == []  # reads that failed, searches that found nothing


async def test_code_that_opens_the_shipped_docs_folder_is_contamination(ablated: Any) -> None:
    tree, mcp, _, trace = ablated
    sneaky = (
        "import biopb_mcp, os\n"
        "folder = os.path.join(os.path.dirname(biopb_mcp.__file__), '_docs_data')\n"
        "print(sorted(os.listdir(folder)))\n"
    )
    with anyio.fail_after(120):
        async with Client(mcp) as client:
            await client.call_tool("start_kernel", {})
            result = await client.call_tool("execute_code", {"code": sneaky})
            assert "segment-nuclei.md" in _text(result)  # the kernel can still reach the files…
            notebooks = tree.state_dir / "notebooks"
            while not any("_docs_data" in path.read_text(errors="replace") for path in notebooks.glob("*.ipynb")):
                await anyio.sleep(0.05)
    found = contamination(tree, trace)
    assert "code:_docs_data" in found and "output:segment-nuclei" in found  # …and the run is flagged


def test_a_store_without_withheld_ids_serves_ignored_docs_by_id(tmp_path: Path) -> None:
    """The product's default: ignoring a doc unlists it, and it stays readable by exact id."""
    (tmp_path / "index.md").write_text(
        "# i\n\n## References\n- kernel: k\n\nignored: segment-nuclei\n", encoding="utf-8"
    )
    store = DocStore(tmp_path)
    assert "segment-nuclei" in render_index(store)  # the ignored: line, for the agent to edit
    assert "# " in store.doc_text("segment-nuclei")[0]
    assert "[[large-image]]" in store.doc_text("kernel")[0]
    withholding = DocStore(tmp_path, withhold=["segment-nuclei"])
    assert "segment-nuclei" not in withholding.listed_ids() and "segment-nuclei" not in withholding.shelf.doc_ids()
