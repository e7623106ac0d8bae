"""The --repeat summary's statistics: Wilson intervals, exact McNemar, per-category tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.report import mcnemar_exact, pairs_needed, summarize, wilson


def test_wilson_interval_matches_known_values() -> None:
    low, high = wilson(17, 20)
    assert (round(low, 3), round(high, 3)) == (0.640, 0.948)
    assert wilson(0, 10)[0] == 0.0 and round(wilson(0, 10)[1], 3) == 0.278
    assert wilson(10, 10)[1] == 1.0


def test_exact_mcnemar_on_discordant_pairs() -> None:
    assert mcnemar_exact(0, 0) is None
    assert mcnemar_exact(6, 0) == pytest.approx(2 * 0.5**6)
    assert mcnemar_exact(5, 1) == pytest.approx(2 * (1 + 6) / 64)
    assert mcnemar_exact(3, 3) == pytest.approx(1.0)


def test_pairs_needed_projects_the_observed_discordance() -> None:
    # 4 docs-only of 10 pairs: 6 one-sided discordant pairs give p = 2 / 64 < 0.05, in 15 pairs
    assert pairs_needed(4, 0, 10) == (6, 15)
    assert mcnemar_exact(6, 0) < 0.05 < mcnemar_exact(5, 0)  # type: ignore[operator]
    # a 3:1 split needs more: the smallest discordant count at that split with p < 0.05
    needed, pairs = pairs_needed(3, 1, 20)  # type: ignore[misc]
    assert mcnemar_exact(round(needed * 0.75), needed - round(needed * 0.75)) < 0.05  # type: ignore[operator]
    assert pairs == -(-needed * 20 // 4)
    assert pairs_needed(2, 2, 10) is None and pairs_needed(0, 0, 10) is None


def _row(case: str, category: str, arm: str, repeat: int, passed: bool) -> dict[str, Any]:
    return {
        "case": case,
        "category": category,
        "arm": arm,
        "repeat": repeat,
        "passed": passed,
        "detail": "d",
        "covered_by": [],
        "timed_out": False,
        "harness_error": None,
        "tool_calls": {"execute_code": 2},
        "docs_read": ["lab/microscope"] if arm == "docs" else [],
        "read_doc_called": arm == "docs",
        "duration_s": 2.0,
        "contaminated": [],
    }


def _repeat_rows() -> list[dict[str, Any]]:
    """Two cases, three repeats in both arms: the lab case passes only with the docs."""
    rows = []
    for repeat in range(3):
        rows += [_row("lab-a", "lab", "docs", repeat, True), _row("lab-a", "lab", "nodocs", repeat, False)]
        rows += [_row("text-b", "textbook", "docs", repeat, True), _row("text-b", "textbook", "nodocs", repeat, True)]
    return rows


def test_repeat_summary_has_rates_paired_test_and_categories() -> None:
    rows = _repeat_rows()
    text = summarize(rows, agent="m", wall_s=5, cases=2, repeat=3)
    assert "**docs: 6 passed, 0 failed · no docs: 3 passed, 3 failed**" in text
    assert "| docs | 6 | 0 | 100% | 61%–100% |" in text
    assert "| no docs | 3 | 3 | 50% | 19%–81% |" in text
    assert "Pairs: both pass: 3 · docs only: 3 · no docs only: 0 · both fail: 0" in text
    assert "exact McNemar on the discordant pairs: p = 0.25" in text
    assert "p < 0.05 needs 6 discordant pairs, about 12 pairs in all (this run has 6)" in text
    assert "| lab-a | lab | 0 | docs | d |" in text
    assert "| textbook | 1 | 3/3 | 3/3 |" in text and "| lab | 1 | 3/3 | 0/3 |" in text
    assert "| docs | 6/6 (100%) | lab/microscope ×6 |" in text


def _scored(case: str, arm: str, repeat: int, reported: float | None, truth: float = 10.0) -> dict[str, Any]:
    row = _row(case, "textbook", arm, repeat, reported is not None and abs(reported - truth) <= 1)
    row["score"] = (
        None
        if reported is None
        else {"error": abs(reported - truth), "unit": "nuclei", "reported": reported, "truth": truth, "limit": 1}
    )
    row["cost"] = {"calls": 4, "executions": 2, "kernel_s": 1.5, "answer_chars": 3000, "read_doc_chars": 1000}
    row["same_data"] = True
    return row


def test_scores_agreement_and_cost_sections() -> None:
    """Errors per arm (median and range, a missing answer counted apart), the paired comparison of
    errors against the docs arm, the spread of repeats, and the cost per solved case."""
    from bench.scores import sign_test, wilcoxon_exact

    rows = []
    for repeat, (docs, off, nodocs) in enumerate([(10, 12, 14), (10, 11, None), (11, 13, 16)]):
        rows += [
            _scored("count-a", "docs", repeat, docs),
            _scored("count-a", "procedures-off", repeat, off),
            _scored("count-a", "nodocs", repeat, nodocs),
        ]
    text = summarize(rows, agent="m", wall_s=5, cases=1, repeat=3)
    assert "| count-a | nuclei (≤ 1) | 0 [0–1] | 2 [1–3] | 5 [4–6]; no answer 1/3 |" in text
    # docs smaller in all 3 pairs against each arm; the missing answer loses its pair
    assert "| procedures off | 3 | 3 | 0 | 0 | 0.25 | 6, p = 0.25 | 0 vs 2 |" in text
    assert "| no docs | 3 | 3 | 0 | 0 | 0.25 | 3, p = 0.5 | 0.5 vs 5 |" in text
    assert "all on the same data: a spread is the agent disagreeing with itself." in text
    assert "| count-a | nuclei | 1; 1; 3/3 | 2; 2; 3/3 | 2; 2; 2/3 |" in text
    assert "| docs | 3/3 | 4 (4) | 2 (2) | 1.5 (1.5) | 3 (3) | 1 |" in text
    assert "| no docs | 0/3 | – (none solved) (4)" in text
    assert sign_test(9, 1) == pytest.approx(0.021484375) and sign_test(0, 0) is None
    # the exact null with tied ranks (scipy's exact test refuses ties; enumeration does not)
    assert wilcoxon_exact([1, -2, 3, 4, 5, 6, 7, 8]) == pytest.approx((34.0, 0.0234375))
    assert wilcoxon_exact([1, 1, -1, 2]) == pytest.approx((8.0, 0.5))
    assert wilcoxon_exact([0, 0]) is None


STYLE = """
body { font: 15px/1.5 -apple-system, "Segoe UI", "Liberation Sans", "DejaVu Sans", sans-serif;
       color: #1f2328; max-width: 980px; margin: 24px auto; padding: 0 24px; }
h1, h2, h3 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }
table { border-collapse: collapse; margin: 12px 0; }
th, td { border: 1px solid #d1d9e0; padding: 4px 12px; }
th { background: #f6f8fa; }
code { background: #eff1f3; padding: .1em .3em; border-radius: 4px; }
::-webkit-scrollbar { display: none; }
"""
"""Close to how GitHub and editors' previews show markdown, where a reader opens summary.md."""


def test_a_report_reads_as_its_headline_and_tables_in_a_browser(tmp_path: Path) -> None:
    """summary.md rendered as a markdown viewer shows it: the headline in bold, the pass rates and
    the discordant pairs as tables with their figures; its picture is the guide's."""
    from _tests.support.screenshots import chromium, keep_for_guide, open_chromium

    chromium()  # skip (or fail under BIOPB_REQUIRE_LIVE=1) before any work without a browser
    import markdown  # type: ignore[import-untyped]  # ships no type information
    from selenium.webdriver.common.by import By

    rows = _repeat_rows()
    for row in rows:  # what a lab check says of its measure (the format of bench/cases/lab.py's)
        ratio = 0.99 if row["passed"] else 0.49
        row["detail"] = f"median area_um2 {64 * ratio:.1f} vs true 64.0 (ratio {ratio:.2f}, allowed 0.85-1.15)"
    text = summarize(rows, agent="example", wall_s=312, cases=2, repeat=3)
    page = tmp_path / "summary.html"
    body = markdown.markdown(text, extensions=["tables"])
    page.write_text(f"<!doctype html><meta charset=utf-8><style>{STYLE}</style>{body}", encoding="utf-8")

    driver = open_chromium(tmp_path / "chromium-profile", 1100, 900)
    try:
        driver.get(page.as_uri())
        headline = [b.text for b in driver.find_elements(By.TAG_NAME, "strong")]
        tables = [
            [
                [cell.text for cell in tr.find_elements(By.XPATH, "./th|./td")]
                for tr in t.find_elements(By.TAG_NAME, "tr")
            ]
            for t in driver.find_elements(By.TAG_NAME, "table")
        ]
        shown = driver.find_element(By.TAG_NAME, "body").text
        shot = tmp_path / "report.png"
        driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    assert headline[0] == "docs: 6 passed, 0 failed · no docs: 3 passed, 3 failed", headline
    rates, discordant = tables[0], tables[1]
    assert rates == [
        ["arm", "passed", "failed", "pass rate", "95 % interval (Wilson)"],
        ["docs", "6", "0", "100%", "61%–100%"],
        ["no docs", "3", "3", "50%", "19%–81%"],
    ], rates
    assert discordant[0] == ["case", "category", "repeat", "passed in", "the other arm's detail"]
    assert discordant[1][:4] == ["lab-a", "lab", "0", "docs"] and "ratio 0.49" in discordant[1][4], discordant
    assert "exact McNemar on the discordant pairs: p = 0.25" in shown
    assert "|" not in shown, "a table left as raw markdown"
    keep_for_guide(shot, "report-screenshot.png")  # the guide's report page shows it
