"""Clients we did not write drive the real server: the TypeScript SDK client and the MCP conformance suite.

Our other tests use the Python SDK client, which shares the server's assumptions; hosts (Claude
Code, VS Code, Claude Desktop) use the TypeScript SDK. ``_tests/clients/install`` puts both, pinned
by ``_tests/clients/package-lock.json``, in a cache outside the repository. Without node or that
cache these tests skip, unless ``BIOPB_REQUIRE_NODE_CLIENTS=1`` (set by ``.ci/run``) makes a missing
client a failure, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import httpx2
import pytest

from _tests.server.test_http import HttpServer

pytestmark = pytest.mark.slow

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
"""The pinned package files, the installer and the TypeScript client script."""

CACHE_ENV = "BIOPB_NODE_CACHE"
"""Moves the cache the installer fills (default ``~/.cache/biopb-mcp-node``)."""

REQUIRE_ENV = "BIOPB_REQUIRE_NODE_CLIENTS"
"""``1``: a missing node, cache or Node 22 fails these tests instead of skipping them."""

CLIENT_TIMEOUT = 240.0
"""Seconds one run of a client may take before it counts as hung (a run takes 5–15 s)."""

APPLICABLE_SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)
"""Conformance scenarios that test a server as it is, with no tool, resource or prompt of the
suite's own reference server ("everything server"): these run against ours."""

WHEN_ADVERTISED = {"prompts-list": "prompts"}
"""Scenarios that apply once the server advertises the capability: they run only then."""

NOT_APPLICABLE = {
    **dict.fromkeys(
        (
            "tools-call-simple-text",
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-error",
            "tools-call-with-progress",
            "tools-call-with-logging",
            "tools-call-sampling",
            "tools-call-elicitation",
            "json-schema-2020-12",
            "elicitation-sep1034-defaults",
            "elicitation-sep1330-enums",
            "server-sse-polling",
        ),
        "calls a test_* tool of the suite's reference server by name",
    ),
    **dict.fromkeys(
        (
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "resources-subscribe",
            "resources-unsubscribe",
        ),
        "reads or subscribes to a test:// resource of the suite's reference server",
    ),
    **dict.fromkeys(
        (
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
            "completion-complete",
        ),
        "gets or completes a test_* prompt of the suite's reference server",
    ),
    "logging-set-level": "the server does not advertise the logging capability (its log is a file)",
}
"""Every other server scenario of the pinned suite, and why it cannot pass against this server.
The TypeScript client checks the same ground with this server's own tools and resources."""


def _missing(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: a missing Node client is a failure)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The cache's node_modules, installed from this very lock file."""
    if shutil.which("node") is None:
        _missing("node is not on PATH (the TypeScript SDK client needs Node.js >= 18)")
    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "biopb-mcp-node")
    stamp = cache / "installed-lock.json"
    lock = (CLIENTS / "package-lock.json").read_bytes()
    if not stamp.is_file() or stamp.read_bytes() != lock:
        _missing(
            f"the Node clients in {cache} are missing or older than _tests/clients/package-lock.json; "
            "run _tests/clients/install"
        )
    return cache / "node_modules"


@pytest.fixture(scope="module")
def node22(node_modules: Path) -> Path:
    """The Node 22 binary the lock brings: the conformance suite needs ``fs.globSync`` (Node >= 22)."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    binary = node_modules / f"node-linux-{arch}" / "bin" / "node"
    if sys.platform != "linux" or arch is None or not binary.is_file():
        _missing(f"no Node 22 from the npm registry for {sys.platform}/{platform.machine()} in {node_modules}")
    return binary


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_typescript_sdk_client_passes_every_check(transport: str, node_modules: Path, tmp_path: Path) -> None:
    run = _run(
        [
            "node",
            str(CLIENTS / "ts_client.mjs"),
            transport,
            "--sdk",
            str(node_modules),
            "--root",
            str(tmp_path),
            "--",
            sys.executable,
            "-m",
            "biopb_mcp",
        ],
        cwd=tmp_path,
    )
    if run.returncode != 0:
        pytest.fail(f"ts_client.mjs {transport} exited {run.returncode}:\n{run.stdout}\n{run.stderr}", pytrace=False)


def _capabilities(url: str) -> dict[str, object]:
    """What the server at ``url`` advertises in its initialize answer."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    response = httpx2.post(url, json=init, timeout=30, headers={"accept": "application/json, text/event-stream"})
    data = next(line[5:] for line in response.text.splitlines() if line.startswith("data:"))
    capabilities: dict[str, object] = json.loads(data)["result"]["capabilities"]
    return capabilities


@pytest.fixture(scope="module")
def no_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """``biopb-mcp --transport http --no-auth``: the conformance suite cannot send a bearer token,
    and its DNS-rebinding scenario is written for a loopback server without one."""
    server = HttpServer(tmp_path_factory.mktemp("conformance"), "--no-auth")
    yield server
    server.stop()


def _conformance(node22: Path, node_modules: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    suite = node_modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    return _run([str(node22), str(suite), *args], cwd=cwd)


def test_every_conformance_server_scenario_is_run_or_said_why_not(
    node22: Path, node_modules: Path, tmp_path: Path
) -> None:
    listing = _conformance(node22, node_modules, "list", "--server", cwd=tmp_path)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    known = set(re.findall(r"^\s*- (\S+)", listing.stdout, re.MULTILINE))
    classified = set(APPLICABLE_SCENARIOS) | set(WHEN_ADVERTISED) | set(NOT_APPLICABLE)
    assert known == classified, f"new: {sorted(known - classified)}, gone: {sorted(classified - known)}"


@pytest.mark.parametrize("scenario", [*APPLICABLE_SCENARIOS, *WHEN_ADVERTISED])
def test_conformance_scenario_passes(
    scenario: str, node22: Path, node_modules: Path, no_auth_server: HttpServer, tmp_path: Path
) -> None:
    needs = WHEN_ADVERTISED.get(scenario)
    if needs is not None and needs not in _capabilities(no_auth_server.url):
        pytest.skip(f"the server does not advertise {needs}, so {scenario} does not apply")
    # -o: the suite writes its results under the working dir unless told where.
    run = _conformance(
        node22,
        node_modules,
        "server",
        "--url",
        no_auth_server.url,
        "--scenario",
        scenario,
        "-o",
        str(tmp_path / "results"),
        cwd=tmp_path,
    )
    checks = [path.read_text() for path in (tmp_path / "results").rglob("checks.json")]
    if run.returncode != 0:
        pytest.fail(f"{scenario} exited {run.returncode}:\n{run.stdout}\n{run.stderr}\n{checks}", pytrace=False)
