"""Each host's config line, as the README and the install page write it, starts a server that answers.

Claude Code, Claude Desktop, Cursor and VS Code are not installed here, so each line is read the
way its host reads it (the command after ``claude mcp add NAME --``; the ``command`` and ``args``
of the JSON entry) and that command is started and taken through an MCP handshake.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from _tests.support.isolation import isolated_vars

REPO = Path(__file__).resolve().parents[2]
HOSTS = ("Claude Code", "Claude Desktop", "Cursor", "VS Code")


def host_lines(text: str) -> dict[str, tuple[str, list[str]]]:
    """Host -> (command, args), from the first code block after a paragraph that opens with its name."""
    found: dict[str, tuple[str, list[str]]] = {}
    for host in HOSTS:
        match = re.search(rf"^{re.escape(host)}[ :(].*?\n```(sh|json)\n(.+?)\n```", text, re.M | re.S)
        assert match, f"no config line for {host}"
        kind, line = match.group(1), match.group(2).strip()
        if kind == "sh":
            words = shlex.split(line)
            assert words[:3] == ["claude", "mcp", "add"] and "--" in words, line
            rest = words[words.index("--") + 1 :]
            found[host] = (rest[0], rest[1:])
        else:
            entry = json.loads(line)
            servers = entry["servers"] if host == "VS Code" else entry["mcpServers"]
            (server,) = servers.values()
            if host == "VS Code":
                assert server["type"] == "stdio", server
            found[host] = (server["command"], server["args"])
    return found


def test_the_readme_and_the_install_page_give_each_host_the_same_line() -> None:
    readme = host_lines((REPO / "README.md").read_text(encoding="utf-8"))
    page = host_lines((REPO / "docs" / "install.md").read_text(encoding="utf-8"))
    assert readme == page and set(readme) == set(HOSTS), (readme, page)


@pytest.mark.slow
@pytest.mark.anyio
async def test_each_hosts_line_starts_a_server_that_completes_a_handshake(tmp_path: Path) -> None:
    lines = host_lines((REPO / "README.md").read_text(encoding="utf-8"))
    env = {**os.environ, **isolated_vars(tmp_path)}
    for command, args in sorted(set((c, tuple(a)) for c, a in lines.values())):
        assert shutil.which(command), f"{command!r} is not on PATH: pip install -e . first"
        params = StdioServerParameters(command=command, args=list(args), env=env, cwd=str(tmp_path))
        with anyio.fail_after(120):
            async with Client(params, mode="legacy", read_timeout_seconds=90) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert "segment-nuclei" in (client.instructions or "")
        assert {"start_kernel", "execute_code"} <= tools, (command, args, tools)
