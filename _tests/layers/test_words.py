"""The domain states facts: nothing under docs/ or kernel/ builds a sentence that names a tool, a
command or a config key. Those sentences are the text layer's (``biopb_mcp.text``), which words
the same facts for the agent, for a terminal and for the log reader alike."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import biopb_mcp
from biopb_mcp.config.settings import SCHEMA

PACKAGE = Path(biopb_mcp.__file__).parent
TOOLS = (
    "start_kernel",
    "execute_code",
    "poll_job",
    "interrupt_kernel",
    "restart_kernel",
    "inspect_object",
    "server_status",
    "read_doc",
    "write_doc",
    "search_docs",
    "look_at_viewer",
)
NAMES = re.compile(
    r"\b(" + "|".join(TOOLS) + r")\b"
    r"|\bbiopb-mcp [a-z]|--existing\b"
    r"|\b(" + "|".join(re.escape(key.dotted) for key in sorted(SCHEMA, key=lambda k: -len(k.dotted))) + r")\b"
)
NOT_SENTENCES = {
    # (file under biopb_mcp, a string that names one but is no sentence to a reader)
    ("kernel/lifeline.py", "^=== kernel launch"): "a regex over the kernel log, matching ipykernel's banner",
    ("kernel/notebook.py", "biopb-mcp is not installed"): "code in the notebook's setup cell, run by a re-run",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            found.add(id(body[0].value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            found.add(id(node.value))  # attribute docstrings
    return found


def _log_arguments(tree: ast.AST) -> set[int]:
    """Strings handed to ``logger.<level>(...)``: the log reader's, worded where they are logged."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "logger"
        ):
            for arg in node.args:
                found.update(id(sub) for sub in ast.walk(arg))
    return found


def sentences_naming_actions() -> list[str]:
    """Strings of more than one word (a bare name such as a config key or a version's source is a
    fact, not a sentence) that name a tool, a command or a config key."""
    hits = []
    for root in ("docs", "kernel"):
        for path in sorted((PACKAGE / root).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            if rel.startswith("kernel/inside/"):
                continue  # runs in the kernel's own Python: it cannot reach the text layer
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree) | _log_arguments(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                    if (
                        " " in node.value.strip()
                        and NAMES.search(node.value)
                        and not any(rel == f and marker in node.value for f, marker in NOT_SENTENCES)
                    ):
                        hits.append(f"{rel}:{node.lineno}: {node.value[:100]!r}")
    return hits


def test_no_domain_module_words_a_tool_a_command_or_a_config_key() -> None:
    assert sentences_naming_actions() == []


def test_the_check_sees_such_a_sentence(tmp_path: Path) -> None:
    tree = ast.parse('raise ValueError("no kernel: call start_kernel first")\nx = "set kernel.name in the file"\n')
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert all(NAMES.search(s) for s in strings)
