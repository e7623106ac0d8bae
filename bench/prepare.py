"""Isolated config trees for bench runs, and the ablation index (seed 001 §6).

A bench run must never see, or write to, the user's real config, state or docs. Every run gets a
directory used as ``BIOPB_CONFIG_DIR`` with its own ``config.toml`` (state, runtime and log paths
inside it) and its own local docs tier, and the agent's environment points every XDG and Jupyter
location there too.

The ablation is one line-based transform of the shipped index: every entry under the
``## Procedures`` heading moves to the ``ignored:`` line, so nothing lists a procedure, the
New-shipped tail does not resurface it, and the handshake shows no procedure id. Reference entries
stay. That heading is the only one named from outside the index.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import tomli_w

__all__ = [
    "PROCEDURES_HEADING",
    "Ablation",
    "ConfigTree",
    "ablate_index",
    "child_env",
    "prepare_tree",
    "server_command",
    "shipped_index_path",
    "write_mcp_config",
]

PROCEDURES_HEADING = "## Procedures"
"""The one index heading the bench names; the seed gate test pins it."""

_ENTRY = re.compile(r"^\s*[-*]\s+([A-Za-z0-9._/-]+)\s*:")
"""An index entry line: ``- <id>: <hook>`` (the store recognises the same shape)."""

_IGNORED = re.compile(r"^\s*ignored:\s*(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s")


@dataclass(frozen=True)
class Ablation:
    """The ablated index text, which ids moved to ``ignored:``, and which entries stayed listed."""

    text: str
    moved: list[str]
    kept: list[str]


def shipped_index_path() -> Path:
    """Where the shipped seed index lives (found without importing the store)."""
    import biopb_mcp

    return Path(biopb_mcp.__file__).parent / "_docs_data" / "index.md"


def ablate_index(text: str) -> Ablation:
    """Move every entry under ``## Procedures`` to the ``ignored:`` line; keep everything else.

    The section runs from the heading to the next heading of the same or a higher level; deeper
    sub-headings inside it still belong to it. Ids already ignored stay ignored, once each.

    Raises:
        ValueError: the index has no ``## Procedures`` heading, so there is nothing to ablate
            and the arm would silently equal the docs arm.
    """
    lines = text.splitlines()
    out: list[str] = []
    moved: list[str] = []
    kept: list[str] = []
    ignored_at: int | None = None
    ignored_ids: list[str] = []
    in_procedures = False
    found = False
    for line in lines:
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            if line.strip() == PROCEDURES_HEADING:
                in_procedures, found = True, True
            elif in_procedures and level <= 2:
                in_procedures = False
        ignored = _IGNORED.match(line)
        if ignored:
            ignored_at = len(out)
            ignored_ids += [part.strip() for part in ignored.group(1).split(",") if part.strip()]
            out.append(line)
            continue
        entry = _ENTRY.match(line)
        if entry and in_procedures:
            moved.append(entry.group(1))
            continue
        if entry:
            kept.append(entry.group(1))
        out.append(line)
    if not found:
        raise ValueError(f"index has no {PROCEDURES_HEADING!r} heading; cannot build the no-docs arm")
    merged = ignored_ids + [doc_id for doc_id in moved if doc_id not in ignored_ids]
    ignored_line = "ignored: " + ", ".join(merged)
    if ignored_at is None:
        if out and out[-1].strip():
            out.append("")
        out.append(ignored_line)
    else:
        out[ignored_at] = ignored_line
    return Ablation(text="\n".join(out) + "\n", moved=moved, kept=kept)


@dataclass(frozen=True)
class ConfigTree:
    """A prepared, isolated config tree; ``root`` is the run's ``BIOPB_CONFIG_DIR``."""

    root: Path
    bench_docs: bool
    moved: list[str]

    @property
    def docs_dir(self) -> Path:
        return self.root / "docs"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def runtime_dir(self) -> Path:
        return self.root / "run"


def prepare_tree(out: Path, *, bench_docs: bool, index_text: str | None = None) -> ConfigTree:
    """Write a fresh config tree at ``out`` (created; must be empty or absent).

    Args:
        out: the directory to use as ``BIOPB_CONFIG_DIR``.
        bench_docs: True keeps the seed index unchanged; False writes the ablated index.
        index_text: the seed index to start from (default: the shipped one).

    Raises:
        FileExistsError: ``out`` exists and is not empty (a run never reuses a tree).
        ValueError: the index cannot be ablated.
    """
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; a bench config tree must be fresh")
    seed = index_text if index_text is not None else shipped_index_path().read_text(encoding="utf-8")
    moved: list[str] = []
    if not bench_docs:
        ablation = ablate_index(seed)
        seed, moved = ablation.text, ablation.moved
    tree = ConfigTree(root=out.resolve(), bench_docs=bench_docs, moved=moved)
    tree.docs_dir.mkdir(parents=True)
    tree.state_dir.mkdir()
    tree.runtime_dir.mkdir(mode=0o700)
    (tree.docs_dir / "index.md").write_text(seed, encoding="utf-8")
    config = {
        "server": {
            "state_dir": str(tree.state_dir),
            "runtime_dir": str(tree.runtime_dir),
            "log_file": str(tree.state_dir / "server.log"),
        },
    }
    (tree.root / "config.toml").write_text(tomli_w.dumps(config), encoding="utf-8")
    (tree.root / "bench.json").write_text(
        json.dumps({"bench_docs": bench_docs, "moved_to_ignored": moved}, indent=2) + "\n", encoding="utf-8"
    )
    return tree


def child_env(tree: ConfigTree) -> dict[str, str]:
    """Every variable that could lead a child to the user's real dirs, pointed into the tree.

    BIOPB_CONFIG_DIR moves the config and docs; the XDG, Jupyter and IPython variables keep
    platformdirs, jupyter-client and the kernel's history database inside the tree too.
    """
    root = tree.root
    xdg = root / "xdg"
    return {
        "BIOPB_CONFIG_DIR": str(root),
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_STATE_HOME": str(xdg / "state"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_CACHE_HOME": str(xdg / "cache"),
        "XDG_RUNTIME_DIR": str(tree.runtime_dir),
        "JUPYTER_CONFIG_DIR": str(xdg / "jupyter"),
        "JUPYTER_DATA_DIR": str(xdg / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(tree.runtime_dir),
        "IPYTHONDIR": str(xdg / "ipython"),
        "MPLCONFIGDIR": str(xdg / "matplotlib"),
        "MPLBACKEND": "Agg",
        "PYTHONUNBUFFERED": "1",
    }


def server_command() -> list[str]:
    """How to start biopb-mcp in this environment: the console script beside this Python if it
    exists, else ``python -m biopb_mcp`` (same interpreter, so the same installed package)."""
    script = Path(sys.executable).with_name("biopb-mcp")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("biopb-mcp")
    if found:
        return [found]
    return [sys.executable, "-m", "biopb_mcp"]


def write_mcp_config(path: Path, tree: ConfigTree, trace_file: Path) -> dict[str, object]:
    """Write the agent's MCP client config (the common ``mcpServers`` JSON form) and return it."""
    command, *args = server_command()
    config: dict[str, object] = {
        "mcpServers": {
            "biopb": {
                "command": command,
                "args": [*args, "--trace", str(trace_file)],
                "env": child_env(tree),
            }
        }
    }
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config
