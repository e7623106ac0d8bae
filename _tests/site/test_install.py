"""The installs a host understands: the Claude Desktop bundle and the MCP registry's server.json.

The bundle's manifest is validated by the official ``mcpb`` tool (a pinned Node client, skipped
without it unless ``BIOPB_REQUIRE_NODE_CLIENTS=1``), its command is resolved by that tool's own
resolver and started, and it must complete an MCP handshake. ``server.json`` is validated against
the registry's published schema, kept in ``release/registry/``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import Client, StdioServerParameters

from _tests.server.test_ts_client import CLIENTS, node_modules  # noqa: F401 (a fixture)
from _tests.support.isolation import isolated_vars

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "release" / "mcpb" / "manifest.json"
BUILD = REPO / "release" / "mcpb" / "build.py"
SERVER_JSON = REPO / "server.json"
REGISTRY_SCHEMA = REPO / "release" / "registry" / "server.schema.json"


def _version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def _mcpb(modules: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(modules / ".bin" / "mcpb"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_the_manifest_passes_the_official_mcpb_validate(node_modules: Path) -> None:  # noqa: F811
    run = _mcpb(node_modules, "validate", str(MANIFEST))
    assert run.returncode == 0 and "validation passes" in run.stdout, run.stdout + run.stderr


def test_mcpb_validate_refuses_a_manifest_without_its_server(node_modules: Path, tmp_path: Path) -> None:  # noqa: F811
    """The validator bites: the same manifest without ``server`` fails, naming it."""
    broken = json.loads(MANIFEST.read_text(encoding="utf-8"))
    del broken["server"]
    (tmp_path / "manifest.json").write_text(json.dumps(broken), encoding="utf-8")
    run = _mcpb(node_modules, "validate", str(tmp_path / "manifest.json"))
    assert run.returncode != 0 and "server" in run.stdout, run.stdout + run.stderr


def test_the_built_bundle_holds_the_manifest_and_mcpb_reads_it(node_modules: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "biopb-mcp.mcpb"
    subprocess.run([sys.executable, str(BUILD), "--out", str(out)], check=True, timeout=60, capture_output=True)
    with zipfile.ZipFile(out) as bundle:
        assert bundle.namelist() == ["manifest.json"]
        assert bundle.read("manifest.json") == MANIFEST.read_bytes()
    unpacked = tmp_path / "unpacked"
    run = _mcpb(node_modules, "unpack", str(out), str(unpacked))
    assert run.returncode == 0, run.stdout + run.stderr
    assert (unpacked / "manifest.json").read_bytes() == MANIFEST.read_bytes()


def test_the_manifest_names_this_version() -> None:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    assert manifest["version"] == _version(), "release/mcpb/manifest.json: set version to pyproject's"


def _resolved(modules: Path, bundle_dir: Path, user_config: dict[str, str] | None = None) -> dict:
    run = subprocess.run(
        ["node", str(CLIENTS / "mcpb_config.mjs"), str(modules), str(MANIFEST), str(bundle_dir)]
        + ([json.dumps(user_config)] if user_config else []),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_users_command_path_is_what_the_bundle_runs(node_modules: Path, tmp_path: Path) -> None:  # noqa: F811
    config = _resolved(node_modules, tmp_path, {"command": "/opt/lab-env/bin/biopb-mcp"})
    assert config["command"] == "/opt/lab-env/bin/biopb-mcp" and config["args"] == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_server_started_from_the_manifests_command_completes_a_handshake(
    node_modules: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = _resolved(node_modules, tmp_path)  # the defaults: what an install that changes nothing runs
    if shutil.which(config["command"]) is None:
        pytest.fail(f"{config['command']!r}, the manifest's command, is not on PATH: pip install -e . first")
    env = {**os.environ, **isolated_vars(tmp_path), **config.get("env", {})}
    params = StdioServerParameters(command=config["command"], args=config["args"], env=env, cwd=str(tmp_path))
    with anyio.fail_after(120):
        async with Client(params, mode="legacy", read_timeout_seconds=90) as client:
            instructions = client.instructions or ""
            tools = {t.name for t in (await client.list_tools()).tools}
    assert "segment-nuclei" in instructions, "the doc index is not in the handshake"
    assert {"start_kernel", "execute_code", "read_doc", "write_doc"} <= tools, tools


def _registry_errors(document: dict) -> list[str]:
    schema = json.loads(REGISTRY_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_server_json_is_valid_against_the_registrys_published_schema() -> None:
    document = json.loads(SERVER_JSON.read_text(encoding="utf-8"))
    assert _registry_errors(document) == []
    schema_id = json.loads(REGISTRY_SCHEMA.read_text(encoding="utf-8"))["$id"]
    assert document["$schema"] == schema_id, "server.json names a schema other than the one kept here"


def test_the_registry_schema_refuses_what_the_registry_refuses() -> None:
    """The kept schema bites: a description over the registry's 100 characters, a name with no namespace."""
    document = json.loads(SERVER_JSON.read_text(encoding="utf-8"))
    assert _registry_errors({**document, "description": "x" * 101})
    assert _registry_errors({**document, "name": "biopb-mcp"})


def test_server_json_names_this_version_and_the_name_pypi_ownership_is_checked_by() -> None:
    document = json.loads(SERVER_JSON.read_text(encoding="utf-8"))
    assert document["version"] == _version() and [p["version"] for p in document["packages"]] == [_version()]
    assert document["packages"][0]["identifier"] == "biopb-mcp"
    # the registry checks a PyPI package's ownership by this marker in its README (the PyPI description)
    assert f"mcp-name: {document['name']}" in (REPO / "README.md").read_text(encoding="utf-8")
