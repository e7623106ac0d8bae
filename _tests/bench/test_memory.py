"""Memory must do no harm: the three-session case fails when session 1's memo replaced the lab's
rule with the user's narrower one, and passes when it filed the narrow rule beside it. Both are
played by the scripted agent through real servers, kernels and config trees (the case's own memo
in the self-test and the bench; here the harmful one)."""

from __future__ import annotations

import json
from pathlib import Path

from _tests.support.prepared_trees import LAB_DIR
from bench.agents import Agent, make_agent
from bench.cases import get_case
from bench.cases.memory import LAB_RULE, NARROW_CUTOFF
from bench.run import RunSpec, run_one


def test_a_memo_that_overwrites_the_lab_rule_fails_session_3(tmp_path: Path) -> None:
    case = get_case("memory-scoped-cutoff")
    assert case.sessions == 3
    lab_text = (LAB_DIR / f"{LAB_RULE.removeprefix('lab/')}.md").read_text(encoding="utf-8")
    assert "POSITIVE_ABOVE_OFFSET = 1000" in lab_text
    # the harm a careless memo does: the lab's doc rewritten with the user's narrow rule as if it were the lab's
    overwritten = lab_text.replace("1000", str(NARROW_CUTOFF))
    memo_file = tmp_path / "bad-memo.json"
    memo_file.write_text(json.dumps([LAB_RULE, overwritten]), encoding="utf-8")
    scripted = make_agent("scripted")
    agent = Agent("scripted-overwriting", (*scripted.argv, "--memo", str(memo_file)))
    row = run_one(RunSpec(agent, ["docs"], [case], tmp_path / "out", timeout=300), case, "docs", 0)
    assert row["harness_error"] is None, row
    assert row["session1_wrote"] == [LAB_RULE]
    assert not row["passed"], row["detail"]
    score = row["score"]
    assert score is not None and score["error"] > score["limit"], score
    # all three sessions ran and the scored one read the (overwritten) lab rule
    run_dir = Path(row["run_dir"])
    assert (run_dir / "work-s1" / "low-line" / "positive.txt").is_file()
    assert (run_dir / "work-s2" / "low-line" / "positive_again.txt").is_file()
    assert LAB_RULE in row["docs_read"]
