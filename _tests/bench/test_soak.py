"""``python -m bench soak``: every phase runs at a tiny count and finds nothing; its checks can see a fault.

The quick run checks the harness end to end (real servers, a real kernel, real SIGKILLs), not
the product at scale; the checks are shown to discriminate on tiers broken on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _tests.support.soak import crash, hostile_ids
from bench.__main__ import main as bench_main
from bench.soak import size_caps
from bench.soak.run import FOUND
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import InvalidDocId

TRIED = [
    "hostile ids tried (store)",
    "hostile ids tried (MCP tools + URIs)",
    "crash injections (SIGKILL, store writer mid write_doc)",
    "pipelined calls sent",
    "servers SIGKILLed with a live kernel",
    "slowloris: idle half-sent requests opened",
    "malformed flood: requests sent",
    "search: ordinary long queries sent",
    "search: costly queries sent",
    "size caps: writes tried",
]


SUITE_PHASES = "hostile-store,hostile-mcp,crash,noise,http,search,caps"
"""The two-server phase and the crash rounds through a server run in the reliability tests, which
call the same rounds; here they would only add server start-ups to the suite's CPU time."""


@pytest.mark.slow
def test_quick_soak_runs_its_phases_and_finds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "soak.json"
    argv = ["soak", "--quick", "--phases", SUITE_PHASES, "--kills", "3", "--json", str(out), "--workdir", str(tmp_path)]
    code = bench_main(argv)
    printed = capsys.readouterr().out
    data = json.loads(out.read_text(encoding="utf-8"))
    assert code == 0, printed
    assert data["found"] == dict.fromkeys(FOUND, 0), data["examples"]
    for key in TRIED:
        assert data["counts"].get(key, 0) >= 1, f"{key}: {data['counts']}"
    assert data["counts"]["hostile ids tried (store)"] == data["scale"]["store_ids"] * 11 // 10
    assert data["counts"]["crash injections (SIGKILL, store writer mid write_doc)"] == 3
    assert data["counts"]["pipelined calls sent"] == data["scale"]["calls"]
    assert set(data["seconds"]) == set(SUITE_PHASES.split(","))
    assert "found (0 expected):" in printed and all(key in printed for key in FOUND)
    assert [p.name for p in tmp_path.iterdir()] == ["soak.json"]  # the soak's tree is gone


def test_bad_counts_and_phases_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["soak", "--kills", "-1"]) == 2
    assert bench_main(["soak", "--phases", "crash,nap"]) == 2
    err = capsys.readouterr().err
    assert "must not be negative" in err and "unknown phase(s) nap" in err


def test_tier_check_sees_a_torn_doc_and_an_index_line_without_its_doc(tmp_path: Path) -> None:
    local = tmp_path / "docs"
    DocStore(local).write_doc("big", body=crash.big_body("init"))
    check = crash.TierCheck(local)
    before = (local / "index.md").read_text()
    assert check.check(before, [[]])[1] == []  # a whole tier passes
    text = (local / "big.md").read_text()
    (local / "big.md").write_text(text[: len(text) // 2])  # torn, as a non-atomic write killed mid-way
    (local / "index.md").write_text(crash.index_states(before, ["c-0-0"])[1])  # the line, never the doc
    kinds = sorted(kind for kind, _what in check.check(before, [["c-0-0"]])[1])
    assert kinds == ["lost", "torn"]


def test_id_checks_see_an_escape_and_a_bare_exception(tmp_path: Path) -> None:
    root = tmp_path / "t"
    local = root / "docs"
    sentinel = hostile_ids.build_tier(root, local)
    before, outside = hostile_ids.snapshot(sentinel), hostile_ids.snapshot(root, exclude=(local,))
    assert hostile_ids.escapes_after(local, sentinel, before, root, outside) == []
    (sentinel / "secret.md").write_text("# overwritten from inside the tier\n")
    (root / "stray.md").write_text("beside the tier\n")
    assert len(hostile_ids.escapes_after(local, sentinel, before, root, outside)) == 2
    assert hostile_ids.refusal_problem(InvalidDocId("Doc id '..' has a '..' segment.")) is None
    assert "bare ValueError" in (hostile_ids.refusal_problem(ValueError("boom")) or "")
    assert "outside the id grammar" in (hostile_ids.landing_problem(local, "../escape") or "")


def test_the_size_cap_check_sees_a_doc_and_an_index_past_their_caps(tmp_path: Path) -> None:
    from biopb_mcp.docs import FILE_MAX_BYTES, INDEX_MAX_LINES

    store = DocStore(tmp_path / "docs", history_keep=2)
    assert size_caps.size_writes(store, 0, 0)[1] == []  # a fresh tier passes
    (store.local_dir / "huge.md").write_bytes(b"a" * (FILE_MAX_BYTES + 1))  # what the old write path left
    (store.local_dir / "index.md").write_text("x\n" * (INDEX_MAX_LINES + 1))
    problems = size_caps.size_writes(store, 0, 0)[1]
    assert any("huge is" in p for p in problems) and any("the index is" in p for p in problems), problems
