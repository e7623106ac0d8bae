"""Reliability-test fixtures: a session counter of what was tried, reported at the end of the run.

The lead records these figures (generated ids tried, concurrent operations, crash injections, bad
files, losses/escapes found), so each test adds to ``counts`` and the totals are written to
``<basetemp>/reliability-counts.json`` and shown in the terminal summary (under xdist, each
worker writes its own file in its own basetemp).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

_TOTALS: Counter[str] = Counter()


@pytest.fixture(scope="session")
def counts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Counter[str]]:
    """Add figures with ``counts["name"] += n``; written to a JSON file when the session ends."""
    yield _TOTALS
    out = Path(tmp_path_factory.getbasetemp()) / "reliability-counts.json"
    out.write_text(json.dumps(dict(_TOTALS), indent=2, sort_keys=True) + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TOTALS:
        terminalreporter.write_sep("-", "reliability counts")
        for key in sorted(_TOTALS):
            terminalreporter.write_line(f"{key}: {_TOTALS[key]}")
