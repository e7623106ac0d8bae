"""One error vocabulary: every error the package raises on purpose is defined in ``errors.py`` and
drawn in its module docstring's tree, so a maintainer finds every kind (and its parent) in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import biopb_mcp
from biopb_mcp import errors
from biopb_mcp.errors import DocNotFound, KernelNotReady, RestartRefused
from biopb_mcp.text.failures import for_agent, for_terminal

PACKAGE = Path(biopb_mcp.__file__).parent
TREE_LINE = re.compile(r"^(?P<indent>\s*)[*x+] (?P<name>[A-Z]\w+)")


def _all_subclasses(cls: type) -> list[type]:
    found: list[type] = []
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        found += [sub, *_all_subclasses(sub)]
    return found


def _drawn_tree() -> dict[str, str | None]:
    """Each class the docstring draws -> the class drawn as its parent (None for the root)."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        match = TREE_LINE.match(line)
        if match is None:
            continue
        depth, name = len(match["indent"]), match["name"]
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def test_the_docstring_draws_every_error_class_under_its_parent() -> None:
    classes = [errors.BiopbMcpError, *_all_subclasses(errors.BiopbMcpError)]
    drawn = _drawn_tree()
    assert drawn == {
        cls.__name__: (None if cls is errors.BiopbMcpError else cls.__bases__[0].__name__) for cls in classes
    }


def test_no_module_outside_errors_defines_an_error_of_the_tree() -> None:
    names = set(_drawn_tree())
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & names or node.name in names:
                    elsewhere.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert elsewhere == []


def test_a_config_file_path_is_quoted_whole_in_the_advice_to_set_a_key() -> None:
    """The advice is assembled from its parts, never patched by replacing characters in it."""
    path = "/home/lab/my .config/biopb-mcp/config.toml"
    not_ready = KernelNotReady(
        "x", state="error", reason="cannot use the runtime dir.", setting="server.runtime_dir", config_file=path
    )
    assert f"Set server.runtime_dir in {path}. Call start_kernel" in for_agent(not_ready)
    refused = RestartRefused("x", reason="no spec.", setting="kernel.name", config_file="/lab/a ,b/config.toml")
    assert "Set kernel.name in /lab/a ,b/config.toml, then call restart_kernel again." in for_agent(refused)


def test_a_person_at_a_terminal_is_told_the_command_and_the_agent_the_tool_call() -> None:
    refused = DocNotFound("x", kind=errors.DocProblem.NO_DOC, doc_id="kernell", suggestions=["kernel"])
    assert for_agent(refused).endswith('read_doc("index") lists the docs; write_doc(id, body=…) creates one.')
    assert "biopb-mcp docs index lists the docs" in for_terminal(refused)
