"""The server log: size-capped rotation whose every file stays private (0600)."""

from __future__ import annotations

import logging
import stat

import pytest
from _pytest.logging import LogCaptureHandler

from biopb_mcp.config.settings import Settings, load_settings
from biopb_mcp.server import logs
from biopb_mcp.server.logs import setup_logging


def _logging_with(monkeypatch: pytest.MonkeyPatch, *, stderr: bool, **limits: int) -> Settings:
    """The server's logging set up with some of its limits lowered; the settings it logs by."""
    for name, value in limits.items():
        monkeypatch.setattr(logs, name, value)
    settings = load_settings()
    setup_logging(settings, stderr=stderr)
    return settings


def test_the_log_rotates_at_its_size_cap_and_every_file_stays_0600(
    root_handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rotation, not the rate limit, is under test here
    settings = _logging_with(monkeypatch, stderr=False, LOG_MAX_BYTES=20_000, LOG_BURST=10_000)
    flood = logging.getLogger("biopb_mcp.test_flood")
    for n in range(2000):  # ~300 KB of records
        flood.warning("record %d %s", n, "y" * 100)
    files = sorted(settings.log_file.parent.glob("server.log*"))
    assert [f.name for f in files] == ["server.log", "server.log.1", "server.log.2"]
    assert sum(f.stat().st_size for f in files) <= 3 * 20_000
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files), [oct(f.stat().st_mode) for f in files]
    assert "record 1999" in settings.log_file.read_text(encoding="utf-8")


def test_a_flood_from_one_line_of_code_is_a_burst_then_one_count(
    root_handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What uvicorn logs per malformed request: one call site, thousands of times a second."""
    settings = _logging_with(monkeypatch, stderr=False, LOG_BURST=5)
    flood = logging.getLogger("uvicorn.error")
    for n in range(3000):
        flood.warning("Invalid HTTP request received. %d", n)
    logging.getLogger("biopb_mcp.other").warning("another line of code is not held back")
    text = settings.log_file.read_text(encoding="utf-8")
    assert text.count("Invalid HTTP request received.") == 5, text
    assert "another line of code is not held back" in text
    for handler in logging.getLogger().handlers:
        handler.flush()  # as logging.shutdown() on the way out: the unfinished window's count is logged
    text = settings.log_file.read_text(encoding="utf-8")
    assert "2995 more records from test_logs.py" in text and "the first: Invalid HTTP request received. 5" in text


def test_stderr_takes_at_most_its_cap_then_says_where_the_rest_goes(
    root_handlers: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    settings = _logging_with(monkeypatch, stderr=True, STDERR_MAX_BYTES=5_000)
    log = logging.getLogger("biopb_mcp.test_stderr")
    for n in range(200):
        log.warning(f"distinct line {n} " + "z" * 80)  # one call site, a new text each time
    err = capfd.readouterr().err
    assert len(err.encode()) <= 5_000
    assert err.rstrip().endswith(f"see {settings.log_file} for the rest)")
    assert "distinct line 0 " in err and "distinct line 49 " not in err
    assert "distinct line 49 " in settings.log_file.read_text(encoding="utf-8")


def test_a_path_that_is_not_utf8_is_logged_as_its_escape(
    root_handlers: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _logging_with(monkeypatch, stderr=False)
    # pytest's own capture handlers would keep the raw record for the test report, which
    # pytest-xdist cannot send back from a worker (a lone surrogate is no UTF-8): ours alone hear it
    root = logging.getLogger()
    for capture in [h for h in root.handlers if isinstance(h, LogCaptureHandler)]:
        monkeypatch.setattr(capture, "level", logging.CRITICAL + 1)
    logging.getLogger("biopb_mcp.test_names").warning("opened %s", "/data/Z\udcfcrich/cells.tif")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert "opened /data/Z\\udcfcrich/cells.tif" in settings.log_file.read_text(encoding="utf-8")
    assert "Logging error" not in capsys.readouterr().err
