"""The SDK shim: an untested mcp version is a warning at build time, a missing private hook a clear error."""

from __future__ import annotations

import logging

import pytest
from mcp.server.mcpserver import MCPServer

from biopb_mcp.config.settings import load_settings
from biopb_mcp.errors import SdkMismatch
from biopb_mcp.server import build_server
from biopb_mcp.server.sdk import (
    TESTED_MCP,
    check_sdk,
    installed_mcp,
    lowlevel_server,
    subscription_bus,
)
from biopb_mcp.text.failures import for_terminal

SDK_LOGGER = "biopb_mcp.server.sdk"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == SDK_LOGGER and r.levelno >= logging.WARNING]


def test_the_installed_sdk_is_a_tested_one_and_building_warns_of_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=SDK_LOGGER):
        mcp, _ = build_server(load_settings())
    assert warnings_of(caplog) == []
    assert lowlevel_server(mcp) is not None and subscription_bus(mcp) is not None
    major_minor = tuple(int(p) for p in installed_mcp().split(".")[:2])
    assert TESTED_MCP[0] <= major_minor < TESTED_MCP[1]


@pytest.mark.parametrize("found", ["2.4.0", "3.0.1", "2.2.9", "2.10.0rc1", "not-a-version", "unknown"])
def test_an_untested_version_is_one_warning_naming_it_and_the_tested_range(
    found: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=SDK_LOGGER):
        check_sdk(MCPServer("probe"), installed=found)
    (message,) = warnings_of(caplog)
    assert f"mcp {found} is installed" in message and ">=2.3,<2.4" in message


@pytest.mark.parametrize("found", ["2.3.0", "2.3.7", "2.3.1.post1", "2.3.0rc2"])
def test_a_tested_version_passes_quietly(found: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=SDK_LOGGER):
        check_sdk(MCPServer("probe"), installed=found)
    assert warnings_of(caplog) == []


def test_a_missing_private_hook_is_a_clear_error_naming_it_and_the_fix() -> None:
    server = MCPServer("probe")
    del server._lowlevel_server  # what an SDK release that renamed it looks like
    with pytest.raises(SdkMismatch) as raised:
        check_sdk(server, installed="2.9.0")
    assert raised.value.missing == ["_lowlevel_server"] and raised.value.tested == ">=2.3,<2.4"
    assert for_terminal(raised.value) == (
        "the installed mcp 2.9.0 has no MCPServer._lowlevel_server, which biopb-mcp needs; install mcp>=2.3,<2.4"
    )
