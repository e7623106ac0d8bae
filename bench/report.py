"""summary.md from results rows: pass rates per arm with intervals, the paired test, the discordant
pairs and how many pairs a run needs at their rate, per-category and per-case tables, docs reading,
two-session memos, contamination and tool calls; beside them (``bench.scores``) the error against
the truth per arm and its paired comparison, the agreement of repeats and the cost per solved case."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from typing import Any

from bench.cases import CATEGORIES
from bench.scores import agreement_lines, cost_lines, error_lines, paired_error_lines

__all__ = ["ARM_LABELS", "headline", "mcnemar_exact", "pairs_needed", "summarize", "wilson"]

ARM_LABELS = {"docs": "docs", "procedures-off": "procedures off", "nodocs": "no docs"}

SCRIPTED_NOTE = (
    "The scripted agents play each case's known solution: this run validates the harness and the "
    "checks, not the docs' value to a model. That takes a model run (`--agent claude`, a command "
    "template, or `--agent handoff` for a host the bench cannot script)."
)


def wilson(passed: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a pass rate (sound at 0 and n, unlike the normal one)."""
    if total == 0:
        return 0.0, 1.0
    p = passed / total
    centre = p + z * z / (2 * total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    scale = 1 + z * z / total
    low = 0.0 if passed == 0 else max(0.0, (centre - half) / scale)
    high = 1.0 if passed == total else min(1.0, (centre + half) / scale)
    return low, high


def mcnemar_exact(docs_only: int, nodocs_only: int) -> float | None:
    """Two-sided exact McNemar p-value: the discordant pairs as a binomial test at 1/2."""
    n = docs_only + nodocs_only
    if n == 0:
        return None
    from scipy.stats import binomtest

    return float(binomtest(docs_only, n, 0.5).pvalue)


def pairs_needed(docs_only: int, nodocs_only: int, pairs: int, alpha: float = 0.05) -> tuple[int, int] | None:
    """(discordant pairs, pairs) a run needs for the exact McNemar test to reach p < ``alpha``, if
    the observed discordance held: the same share of pairs discordant, split the same way between
    the arms. None when it never would (no discordance, or an even split).

    A projection from the observed rates, not a power calculation: half the runs of that size
    would fall short of it.
    """
    discordant = docs_only + nodocs_only
    if discordant == 0 or pairs == 0 or docs_only == nodocs_only:
        return None
    from scipy.stats import binomtest

    share = max(docs_only, nodocs_only) / discordant
    for needed in range(1, 10_000):
        if binomtest(round(needed * share), needed, 0.5).pvalue < alpha:
            return needed, math.ceil(needed * pairs / discordant)
    return None


def _arms(rows: list[dict[str, Any]]) -> list[str]:
    return [arm for arm in ARM_LABELS if any(row["arm"] == arm for row in rows)]


def _passed_failed(rows: list[dict[str, Any]]) -> str:
    passed = sum(row["passed"] for row in rows)
    return f"{passed} passed, {len(rows) - passed} failed"


def headline(rows: list[dict[str, Any]], arms: list[str] | None = None) -> str:
    """Pass/fail per arm side by side: ``docs: 17 passed, 3 failed · no docs: 12 passed, 8 failed``."""
    arms = _arms(rows) if arms is None else arms
    return " · ".join(f"{ARM_LABELS[arm]}: {_passed_failed([r for r in rows if r['arm'] == arm])}" for arm in arms)


def _clip(detail: str, limit: int = 90) -> str:
    detail = detail.replace("|", "/").replace("\n", " ")
    return detail if len(detail) <= limit else detail[: limit - 1] + "…"


def _cell(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "–"
    if any(row["harness_error"] for row in rows):
        return "ERROR"
    passed = sum(row["passed"] for row in rows)
    if len(rows) == 1:
        return ("pass" if passed else "fail") + (" (timeout)" if rows[0]["timed_out"] else "")
    return f"{passed}/{len(rows)}"


def _pairs(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(docs row, no-docs row) for each case and repeat that ran in both arms."""
    keyed = {(row["case"], row["repeat"], row["arm"]): row for row in rows}
    return [
        (keyed[(case, repeat, "docs")], keyed[(case, repeat, "nodocs")])
        for case, repeat, arm in keyed
        if arm == "docs" and (case, repeat, "nodocs") in keyed
    ]


def _rate_lines(rows: list[dict[str, Any]], arms: list[str]) -> list[str]:
    lines = ["| arm | passed | failed | pass rate | 95 % interval (Wilson) |", "|---|---|---|---|---|"]
    for arm in arms:
        arm_rows = [row for row in rows if row["arm"] == arm]
        passed = sum(row["passed"] for row in arm_rows)
        low, high = wilson(passed, len(arm_rows))
        rate = passed / len(arm_rows) if arm_rows else 0.0
        lines.append(f"| {ARM_LABELS[arm]} | {passed} | {len(arm_rows) - passed} | {rate:.0%} | {low:.0%}–{high:.0%} |")
    return lines


def _paired_lines(rows: list[dict[str, Any]]) -> list[str]:
    outcome: Counter[str] = Counter()
    discordant: list[tuple[dict[str, Any], dict[str, Any]]] = []
    pairs = _pairs(rows)
    for with_docs, without in pairs:
        key = {(True, True): "both pass", (True, False): "docs only", (False, True): "no docs only"}
        outcome[key.get((with_docs["passed"], without["passed"]), "both fail")] += 1
        if with_docs["passed"] != without["passed"]:
            discordant.append((with_docs, without))
    docs_only, nodocs_only = outcome["docs only"], outcome["no docs only"]
    p = mcnemar_exact(docs_only, nodocs_only)
    verdict = "no discordant pairs: no test" if p is None else f"exact McNemar on the discordant pairs: p = {p:.3g}"
    needed = pairs_needed(docs_only, nodocs_only, len(pairs))
    if needed is None:
        projection = "at this discordance no number of pairs reaches p < 0.05 (none, or an even split)."
    else:
        projection = (
            f"at this discordance ({docs_only + nodocs_only} of {len(pairs)} pairs, split {docs_only}:{nodocs_only}) "
            f"p < 0.05 needs {needed[0]} discordant pairs, about {needed[1]} pairs in all "
            f"(this run has {len(pairs)})."
        )
    lines = [
        "Pairs: "
        + " · ".join(f"{name}: {outcome[name]}" for name in ("both pass", "docs only", "no docs only", "both fail")),
        "",
        f"Paired test ({docs_only} docs only vs {nodocs_only} no docs only): {verdict}.",
        "",
        f"Pairs needed: {projection}",
    ]
    if discordant:
        lines += [
            "",
            "### Discordant pairs",
            "",
            "| case | category | repeat | passed in | the other arm's detail |",
            "|---|---|---|---|---|",
        ]
        for with_docs, without in discordant:
            winner, loser = ("docs", without) if with_docs["passed"] else ("no docs", with_docs)
            lines.append(
                f"| {with_docs['case']} | {with_docs.get('category', 'textbook')} | {with_docs['repeat']} | {winner} | {_clip(loser['detail'])} |"
            )
    return lines


def _category_lines(rows: list[dict[str, Any]], arms: list[str]) -> list[str]:
    present = [c for c in CATEGORIES if any(row.get("category", "textbook") == c for row in rows)]
    lines = [
        "| category | cases | " + " | ".join(ARM_LABELS[arm] for arm in arms) + " |",
        "|---|---|" + "---|" * len(arms),
    ]
    for category in present:
        in_category = [row for row in rows if row.get("category", "textbook") == category]
        cells = []
        for arm in arms:
            arm_rows = [row for row in in_category if row["arm"] == arm]
            passed = sum(row["passed"] for row in arm_rows)
            cells.append(f"{passed}/{len(arm_rows)}" if arm_rows else "–")
        lines.append(f"| {category} | {len({row['case'] for row in in_category})} | " + " | ".join(cells) + " |")
    return lines


def summarize(rows: list[dict[str, Any]], *, agent: str, wall_s: float, cases: int, repeat: int) -> str:
    """The markdown summary written next to results.jsonl."""
    arms = _arms(rows)
    lines = [
        f"# Bench run: agent `{agent}`",
        "",
        f"{cases} cases × {len(arms)} arm(s) × {repeat} repeat(s) = {len(rows)} runs in {wall_s:.0f} s.",
        "",
        f"**{headline(rows)}**",
        "",
    ]
    errors = [row for row in rows if row["harness_error"]]
    timeouts = sum(row["timed_out"] for row in rows)
    lines.append(f"Harness errors: {len(errors)} · agent timeouts: {timeouts}")
    if agent in ("scripted", "docs-blind"):
        lines += ["", SCRIPTED_NOTE]
    lines += ["", "## Pass rate per arm", "", *_rate_lines(rows, arms)]
    contaminated = [row for row in rows if row.get("contaminated")]
    if "nodocs" in arms:
        clean = [row for row in rows if not row.get("contaminated")]
        lines += [
            "",
            f"Contaminated no-docs runs (reached a withheld procedure): {len(contaminated)}"
            + (f". Without them: **{headline(clean, arms)}**" if contaminated else ""),
        ]
    if {"docs", "nodocs"} <= set(arms):
        lines += ["", *_paired_lines(rows)]
    lines += ["", "## Error against the truth per arm", "", *error_lines(rows, arms, ARM_LABELS)]
    paired = paired_error_lines(rows, arms, ARM_LABELS)
    if paired:
        lines += ["", "## Paired comparison of errors", "", *paired]
    agreement = agreement_lines(rows, arms, ARM_LABELS)
    if agreement:
        lines += ["", "## Agreement across repeats", "", *agreement]
    lines += ["", "## Cost per solved case", "", *cost_lines(rows, arms, ARM_LABELS)]
    lines += ["", "## Per category", "", *_category_lines(rows, arms)]
    by_case: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_case[row["case"]][row["arm"]].append(row)
    lines += ["", "## Per case (paired: same data in both arms)", ""]
    lines.append("| case | category | covered by | " + " | ".join(ARM_LABELS[arm] for arm in arms) + " | detail |")
    lines.append("|---|---|---|" + "---|" * len(arms) + "---|")
    for case, per_arm in by_case.items():
        first = next(iter(per_arm.values()))[0]
        covered = ", ".join(first["covered_by"]) or "(none)"
        seen = {per_arm[arm][-1]["detail"] for arm in arms if per_arm[arm]}
        if len(seen) == 1:
            details = _clip(seen.pop())
        else:
            details = "; ".join(
                f"{ARM_LABELS[arm]}: {_clip(per_arm[arm][-1]['detail'])}" for arm in arms if per_arm[arm]
            )
        cells = " | ".join(_cell(per_arm[arm]) for arm in arms)
        lines.append(f"| {case} | {first.get('category', 'textbook')} | {covered} | {cells} | {details} |")
    lines += [
        "",
        "## Docs reading (from the server's trace)",
        "",
        "| arm | runs that called read_doc | docs read (runs that read it) |",
        "|---|---|---|",
    ]
    for arm in arms:
        arm_rows = [row for row in rows if row["arm"] == arm]
        readers = sum(row["read_doc_called"] for row in arm_rows)
        share = f"{readers}/{len(arm_rows)} ({100 * readers / len(arm_rows):.0f}%)"
        docs: Counter[str] = Counter()
        for row in arm_rows:
            docs.update(set(row["docs_read"]))
        listed = (
            ", ".join(f"{doc} ×{n}" for doc, n in sorted(docs.items(), key=lambda item: (-item[1], item[0]))) or "none"
        )
        lines.append(f"| {ARM_LABELS[arm]} | {share} | {listed} |")
    two_session = [row for row in rows if "session1_wrote" in row]
    if two_session:
        lines += [
            "",
            "## Multi-session cases: did session 1 write a doc, did the scored session read it?",
            "",
            "A memo in the index itself counts as written, and as read by every session on the same tree "
            "(the handshake carries the index). Without the docs session 2 starts on a fresh tree: what "
            "session 1 wrote is gone, so the pair measures what that memory is worth.",
            "",
        ]
        lines += ["| case | arm | repeat | session 1 wrote | session 2 read it | passed |", "|---|---|---|---|---|---|"]
        for row in two_session:
            wrote = ", ".join(row["session1_wrote"]) or "no"
            read = ", ".join(row["session2_read"]) or "no"
            lines.append(
                f"| {row['case']} | {ARM_LABELS[row['arm']]} | {row['repeat']} | {wrote} | {read} | {'yes' if row['passed'] else 'no'} |"
            )
    if contaminated:
        lines += ["", "## Contaminated runs", ""]
        lines += [
            f"- {row['case']} {ARM_LABELS[row['arm']]} r{row['repeat']}: {', '.join(row['contaminated'])}"
            for row in contaminated
        ]
    tools = sorted({tool for row in rows for tool in row["tool_calls"]}) or ["(no tool calls)"]
    lines += ["", "## Tool calls (mean per run) and duration", ""]
    lines.append("| arm | " + " | ".join(tools) + " | median s | max s |")
    lines.append("|---|" + "---|" * (len(tools) + 2))
    for arm in arms:
        arm_rows = [row for row in rows if row["arm"] == arm]
        means = [sum(row["tool_calls"].get(tool, 0) for row in arm_rows) / len(arm_rows) for tool in tools]
        durations = [row["duration_s"] for row in arm_rows if row["duration_s"] is not None]
        median = f"{statistics.median(durations):.1f}" if durations else "–"
        longest = f"{max(durations):.1f}" if durations else "–"
        lines.append(f"| {ARM_LABELS[arm]} | " + " | ".join(f"{m:.1f}" for m in means) + f" | {median} | {longest} |")
    if errors:
        lines += ["", "## Harness errors", ""]
        lines += [f"- {row['case']} {row['arm']} r{row['repeat']}: {row['harness_error']}" for row in errors]
    return "\n".join(lines) + "\n"
