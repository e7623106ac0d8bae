"""What a bench run's agent is given: the environment that keeps it inside its config tree, and
the MCP client config that starts the server there.

The trees themselves (the ablation, the lab tier) are prepared by
:mod:`_tests.support.prepared_trees`, which the tests of the withheld procedures use too.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from _tests.support.prepared_trees import ConfigTree
from biopb_mcp.config.isolated import IsolatedDirs

__all__ = ["child_env", "server_command", "write_mcp_config"]


def child_env(tree: ConfigTree) -> dict[str, str]:
    """Every variable that could lead a child to the user's real dirs, pointed into the tree.

    BIOPB_CONFIG_DIR moves the config and docs; the XDG, Jupyter and IPython variables keep
    platformdirs, jupyter-client and the kernel's history database inside the tree too.
    """
    dirs = IsolatedDirs.in_tree(tree.root, homes=tree.root / "xdg", runtime_dir=tree.runtime_dir)
    return {**dirs.variables(), "PYTHONUNBUFFERED": "1"}


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
