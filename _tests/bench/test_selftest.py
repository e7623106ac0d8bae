"""`python -m bench selftest`'s output: which agent each line is about, and failures it demands read
as expected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.__main__ import main


def test_selftest_lines_name_the_agent_read_demanded_failures_as_expected_and_sum_up_per_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "selftest",
                "--agents",
                "nothing",
                "--cases",
                "crop-roi,split-channels",
                "--out",
                str(tmp_path),
                "--timeout",
                "60",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    runs = [line for line in out.splitlines() if line.startswith("[")]
    assert len(runs) == 4, out
    for line in runs:
        assert re.match(
            r"\[nothing [1-4]/4 +\d+\.\ds\] (crop-roi|split-channels) (docs|nodocs): fail \(expected\) "
            r"\(\d+(\.\d+)? s\)$",
            line,
        ), line
    assert "selftest: agent nothing (1 of 1), 4 runs" in out
    assert re.search(r"^selftest: nothing: 4 runs in \d+ s, 0 passed, 4 failed, all as expected$", out, re.MULTILINE), (
        out
    )
