"""One error vocabulary: every error the package raises on purpose is defined in ``errors.py`` and
drawn in its module docstring's tree, so a maintainer finds every kind (and its parent) in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import biopb_mcp
from biopb_mcp import errors
from biopb_mcp.config.settings import load_settings
from biopb_mcp.errors import ConfigError, DocNotFound, KernelNotReady, RestartRefused
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
        "x", state="error", cause="cannot use the runtime dir.", setting="server.runtime_dir", config_file=path
    )
    assert f"Set server.runtime_dir in {path}. Call start_kernel" in for_agent(not_ready)
    refused = RestartRefused("x", reason="no spec.", setting="kernel.name", config_file="/lab/a ,b/config.toml")
    assert "Set kernel.name in /lab/a ,b/config.toml, then call restart_kernel again." in for_agent(refused)


def test_a_person_at_a_terminal_is_told_the_command_and_the_agent_the_tool_call() -> None:
    refused = DocNotFound("x", kind=errors.DocProblem.NO_DOC, doc_id="kernell", suggestions=["kernel"])
    assert for_agent(refused).endswith('read_doc("index") lists the docs; write_doc(id, body=…) creates one.')
    assert "biopb-mcp docs index lists the docs" in for_terminal(refused)


def test_a_config_refusal_gets_its_next_step_from_its_kind_and_the_loader_states_only_the_facts(
    tmp_path: Path,
) -> None:
    cdir = tmp_path / "cfg"
    cdir.mkdir()
    (cdir / "config.toml").write_text("[kernel\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(cdir)
    said = f"{cdir / 'config.toml'}:1: invalid TOML: Expected ']' at the end of a table declaration"
    assert str(caught.value) == said
    assert for_terminal(caught.value) == for_agent(caught.value) == f"{said}; fix that line"


ERROR_NAMES = {"BiopbMcpError", *_drawn_tree()}


def _error_params(fn: ast.FunctionDef) -> set[str]:
    """The parameters of ``fn`` annotated with a class of the error tree."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return {a.arg for a in args if isinstance(a.annotation, ast.Name) and a.annotation.id in ERROR_NAMES}


def test_the_text_layer_never_cuts_or_patches_an_error_message() -> None:
    """An error's message is quoted whole or not at all: text/ writes its sentence from the kind and
    fields, so no slice, method call or kept copy of ``str(exc)`` is needed there."""
    found = []
    for path in sorted((PACKAGE / "text").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef) or not (params := _error_params(fn)):
                continue
            for node in ast.walk(fn):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "str"
                    and len(node.args) == 1
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id in params
                ):
                    continue
                if isinstance(parents[node], ast.Subscript | ast.Attribute | ast.Assign | ast.AnnAssign):
                    found.append(f"{path.name}:{node.lineno} in {fn.name}")
    assert found == []


def test_a_stuck_inspection_is_told_to_retry_by_the_text_layer_not_the_kernel_client() -> None:
    stuck = errors.KernelError("Another inspection did not finish", kind=errors.KernelProblem.INSPECTION_STUCK)
    assert for_agent(stuck) == "Another inspection did not finish; retry."
    assert str(stuck) in for_agent(stuck)


def test_the_console_command_is_told_how_to_attach_by_the_text_layer() -> None:
    other = errors.KernelError(
        "the biopb-mcp server with pid 7 runs with the config dir /a, not /b",
        kind=errors.KernelProblem.CONSOLE_OTHER_CONFIG,
        pid=7,
        server_config_dir="/a",
        config_dir="/b",
    )
    assert for_terminal(other) == (
        "the biopb-mcp server with pid 7 runs with the config dir /a, not /b: run biopb-mcp console with "
        "BIOPB_CONFIG_DIR=/a"
    )
