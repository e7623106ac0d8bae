"""HTTP guards in isolation: the allowlists, the bearer check, the token file's mode bits."""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from biopb_mcp.server.transports.http import (
    HttpGuard,
    RefusalLog,
    allowlists,
    client_config_lines,
    new_token,
    stable_token,
    write_token_file,
)


@pytest.fixture
def guard() -> HttpGuard:
    hosts, origins = allowlists(4321, ["lab-box:4321"], ["https://notebook.lab"])
    return HttpGuard(allowed_hosts=hosts, allowed_origins=origins, token="s3cret")


def _headers(**extra: str) -> dict[str, str]:
    return {"host": "127.0.0.1:4321", "authorization": "Bearer s3cret", **extra}


def test_loopback_with_token_passes(guard: HttpGuard) -> None:
    assert guard.check(_headers()) is None
    assert guard.check(_headers(host="localhost:4321", origin="http://localhost:4321")) is None
    assert guard.check(_headers(host="lab-box:4321", origin="https://notebook.lab")) is None


@pytest.mark.parametrize("host", ["evil.example:4321", "127.0.0.1:9999", "127.0.0.1", "localhost.evil.example:4321"])
def test_foreign_host_is_refused(guard: HttpGuard, host: str) -> None:
    refused = guard.check(_headers(host=host))
    assert refused is not None and refused[0] == 421


def test_missing_host_is_refused(guard: HttpGuard) -> None:
    refused = guard.check({"authorization": "Bearer s3cret"})
    assert refused is not None and refused[0] == 421


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://127.0.0.1:9999", "null", "http://localhost:4321.evil"]
)
def test_foreign_origin_is_refused(guard: HttpGuard, origin: str) -> None:
    refused = guard.check(_headers(origin=origin))
    assert refused is not None and refused[0] == 403


@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer wrong", "Basic s3cret", "Bearer s3cret2"])
def test_missing_or_wrong_token_is_401(guard: HttpGuard, authorization: str | None) -> None:
    headers = {"host": "127.0.0.1:4321"}
    if authorization is not None:
        headers["authorization"] = authorization
    refused = guard.check(headers)
    assert refused is not None and refused[0] == 401


def test_without_token_only_host_and_origin_are_checked() -> None:
    hosts, origins = allowlists(80)
    assert HttpGuard(hosts, origins, None).check({"host": "localhost:80"}) is None


def test_token_file_is_0600_in_a_0700_dir(tmp_path: Path) -> None:
    runtime = tmp_path / "run" / "biopb"
    token = new_token()
    path = write_token_file(runtime, token)
    assert path.read_text().strip() == token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    assert len(token) >= 40 and token != new_token()


def test_token_file_rewrite_keeps_0600_even_if_loosened(tmp_path: Path) -> None:
    path = write_token_file(tmp_path, "a")
    path.chmod(0o644)
    write_token_file(tmp_path, "b")
    assert path.read_text().strip() == "b"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_client_config_line_carries_the_token() -> None:
    lines = client_config_lines("http://127.0.0.1:5/mcp", "tok")
    assert any('"Authorization": "Bearer tok"' in line for line in lines)
    assert all("tok" not in line for line in client_config_lines("http://127.0.0.1:5/mcp", None))


@pytest.mark.parametrize("presented", ["\xff\xfe", "s3cr\u00e9t", "\u2603", "\ud800"])
def test_a_non_ascii_bearer_token_is_401_not_a_crash(guard: HttpGuard, presented: str) -> None:
    refused = guard.check({"host": "127.0.0.1:4321", "authorization": f"Bearer {presented}"})
    assert refused is not None and refused[0] == 401


def test_a_huge_origin_is_quoted_cut_short(guard: HttpGuard) -> None:
    refused = guard.check(_headers(origin="http://" + "x" * 8000))
    assert refused is not None and refused[0] == 403
    assert len(refused[1]) < 400 and "8007 chars" in refused[1]


def test_a_refusal_flood_is_logged_as_a_burst_then_one_summary(caplog: pytest.LogCaptureFixture) -> None:
    log = RefusalLog(burst=5, window=3600)
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.server.transports.http"):
        for _ in range(1000):
            log.refused(403, "Origin 'x' is not allowed")
    assert len(caplog.records) == 5
    log._window_start -= 3600  # the window has passed: the next refusal reports the count
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.server.transports.http"):
        log.refused(403, "again")
    assert "995 more HTTP requests were refused" in caplog.records[-2].getMessage()
    assert caplog.records[-1].getMessage().endswith("again")


def test_the_stable_token_is_kept_0600_reused_and_rotated(tmp_path: Path) -> None:
    state = tmp_path / "state"
    token, path, how = stable_token(state)
    assert how == "new" and path == state / "http-token" and path.read_text().strip() == token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stable_token(state) == (token, path, "reused")
    rotated, _, how = stable_token(state, rotate=True)
    assert how == "rotated" and rotated != token and path.read_text().strip() == rotated
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_stored_token_others_could_read_or_a_link_is_never_reused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    token, path, _ = stable_token(state)
    path.chmod(0o644)
    replaced, _, how = stable_token(state)
    assert how == "replaced" and replaced != token and stat.S_IMODE(path.stat().st_mode) == 0o600
    planted = tmp_path / "attacker-chosen"
    planted.write_text("A" * 43 + "\n")
    planted.chmod(0o600)
    path.unlink()
    path.symlink_to(planted)
    fresh, _, how = stable_token(state)
    assert how == "replaced" and fresh != "A" * 43
    assert not path.is_symlink() and planted.read_text() == "A" * 43 + "\n"


def _returns_within(seconds: float, call: Callable[[], object]) -> object:
    """``call()``'s result (or its exception), failing (not hanging) the test when it blocks."""
    out: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "blocked"
    if errors:
        raise errors[0]
    return out[0]


def test_a_fifo_at_the_token_path_is_replaced_without_blocking(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO planted at the stored token's name hung the HTTP start on its open."""
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "http-token", 0o600)
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.server.transports.http"):
        result = _returns_within(30, lambda: stable_token(state))
    assert isinstance(result, tuple)
    token, path, how = result
    assert how == "replaced" and stat.S_ISREG(path.stat().st_mode) and path.read_text().strip() == token
    assert any("is a FIFO" in r.getMessage() for r in caplog.records)
    os.mkfifo(state / f".http-token.{os.getpid()}.tmp", 0o600)  # where the new token is written first
    rotated = _returns_within(30, lambda: stable_token(state, rotate=True))
    assert isinstance(rotated, tuple) and rotated[2] == "rotated" and path.read_text().strip() == rotated[0]


def test_an_oversized_or_foreign_token_file_is_not_read(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    big = state / "http-token"
    big.write_text("A" * 100_000)
    big.chmod(0o600)
    token, _, how = stable_token(state)
    assert how == "replaced" and len(token) < 100
