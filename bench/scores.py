"""The continuous side of the report: errors against the truth per arm, paired comparisons of
errors between arms, the agreement of repeats and the cost per solved case.

A pass/fail check cannot see what a procedure gives a model that passes either way: an answer at
the truth and one at the edge of the tolerance both pass. Each row's ``score`` (see
``bench.cases.Score``) keeps the error in the case's own unit, so these tables can. A row without
a score gave no readable answer; it counts as worse than any scored answer.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

__all__ = [
    "agreement_lines",
    "cost_lines",
    "error_lines",
    "paired_error_lines",
    "sign_test",
    "wilcoxon_exact",
]

WILCOXON_MAX_PAIRS = 60
"""Exact Wilcoxon by enumerating rank sums stays cheap up to this many non-zero pairs."""


def sign_test(better: int, worse: int) -> float | None:
    """Two-sided exact sign test: the smaller side's binomial tail at 1/2, doubled (ties dropped)."""
    n = better + worse
    if n == 0:
        return None
    low = min(better, worse)
    tail = sum(Fraction(math.comb(n, k), 2**n) for k in range(low + 1))
    return float(min(Fraction(1), 2 * tail))


def wilcoxon_exact(differences: Sequence[float]) -> tuple[float, float] | None:
    """(W+, two-sided exact p) of the Wilcoxon signed-rank test; zeros dropped, ties given mid-ranks.

    The null distribution is enumerated over the (doubled, so integral) ranks, exact with ties.
    None when no difference is non-zero or there are too many to enumerate."""
    values = [d for d in differences if d != 0 and math.isfinite(d)]
    n = len(values)
    if n == 0 or n > WILCOXON_MAX_PAIRS:
        return None
    order = sorted(range(n), key=lambda i: abs(values[i]))
    doubled = [0] * n  # twice the mid-rank of each |difference|
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(values[order[j + 1]]) == abs(values[order[i]]):
            j += 1
        for k in range(i, j + 1):
            doubled[order[k]] = i + j + 2  # (i+1 + j+1) = twice the mid-rank
        i = j + 1
    observed = sum(r for r, v in zip(doubled, values, strict=True) if v > 0)
    counts: dict[int, int] = {0: 1}
    for r in doubled:
        step: dict[int, int] = defaultdict(int)
        for total, ways in counts.items():
            step[total] += ways
            step[total + r] += ways
        counts = step
    total_sum = sum(doubled)
    mirrored = total_sum - observed
    low, high = min(observed, mirrored), max(observed, mirrored)
    tail = sum(ways for total, ways in counts.items() if total <= low) + sum(
        ways for total, ways in counts.items() if total >= high
    )
    p = min(1.0, tail / 2**n) if low != high else 1.0
    return observed / 2, p


def _error(row: dict[str, Any]) -> float:
    score = row.get("score")
    return float(score["error"]) if isinstance(score, dict) else math.inf


def _relative(row: dict[str, Any]) -> float:
    """The error over the check's tolerance (1 = at the tolerance): comparable across cases."""
    score = row.get("score")
    if not isinstance(score, dict):
        return math.inf
    limit = score.get("limit")
    return float(score["error"]) / limit if limit else float(score["error"])


def _md(text: str) -> str:
    """Text for a table cell: a bar would end the cell."""
    return text.replace("|", "\\|")


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "–"
    return f"{value:.3g}"


def error_lines(rows: list[dict[str, Any]], arms: list[str], labels: dict[str, str]) -> list[str]:
    """Per case: the unit, the truth's tolerance and per arm the median error [min–max] over its runs."""
    by_case: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_case[row["case"]][row["arm"]].append(row)
    lines = [
        "Error against the truth in each case's own unit (0 = at the truth), median [min–max] over the "
        "runs; `no answer` counts runs without a readable number (worse than any number).",
        "",
        "| case | unit (tolerance) | " + " | ".join(labels[arm] for arm in arms) + " |",
        "|---|---|" + "---|" * len(arms),
    ]
    for case, per_arm in by_case.items():
        unit = next(
            (
                f"{_md(r['score']['unit'])} (≤ {_fmt(r['score']['limit'])})"
                if r["score"].get("limit") is not None
                else _md(r["score"]["unit"])
                for a in arms
                for r in per_arm.get(a, [])
                if isinstance(r.get("score"), dict)
            ),
            "(no answer in any run)",
        )
        cells = []
        for arm in arms:
            errors = [_error(r) for r in per_arm.get(arm, [])]
            finite = [e for e in errors if math.isfinite(e)]
            missing = len(errors) - len(finite)
            if not errors:
                cells.append("–")
                continue
            text = (
                f"{_fmt(statistics.median(finite))} [{_fmt(min(finite))}–{_fmt(max(finite))}]"
                if len(finite) > 1
                else (_fmt(finite[0]) if finite else "")
            )
            if missing:
                text = (text + "; " if text else "") + f"no answer {missing}/{len(errors)}"
            cells.append(text)
        lines.append(f"| {case} | {unit} | " + " | ".join(cells) + " |")
    return lines


def paired_error_lines(rows: list[dict[str, Any]], arms: list[str], labels: dict[str, str]) -> list[str]:
    """Each arm against the docs arm on the same data (case and repeat): which had the smaller error."""
    if "docs" not in arms or len(arms) < 2:
        return []
    keyed = {(row["case"], row["repeat"], row["arm"]): row for row in rows}
    lines = [
        "Pairs are the same case and repeat (the same data) in two arms. The sign test counts which arm's "
        "error was smaller (no answer loses to any number; equal errors are ties, dropped); the Wilcoxon "
        "signed-rank test weighs the differences of error / tolerance, on pairs where both arms answered.",
        "",
        "| docs vs | pairs | docs smaller | other smaller | ties | sign test p (exact) | "
        "Wilcoxon W+ (docs smaller), p (exact) | median error/tolerance, docs vs other |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for other in arms:
        if other == "docs":
            continue
        pairs = [
            (row, keyed[(case, repeat, other)])
            for (case, repeat, arm), row in keyed.items()
            if arm == "docs" and (case, repeat, other) in keyed
        ]
        docs_better = sum(_error(a) < _error(b) for a, b in pairs)
        other_better = sum(_error(a) > _error(b) for a, b in pairs)
        ties = len(pairs) - docs_better - other_better
        p = sign_test(docs_better, other_better)
        both = [(_relative(a), _relative(b)) for a, b in pairs if math.isfinite(_relative(a) + _relative(b))]
        wilcoxon = wilcoxon_exact([b - a for a, b in both])
        w_text = "no non-zero difference" if wilcoxon is None else f"{wilcoxon[0]:g}, p = {wilcoxon[1]:.3g}"
        medians = (
            f"{_fmt(statistics.median(a for a, _ in both))} vs {_fmt(statistics.median(b for _, b in both))}"
            if both
            else "–"
        )
        lines.append(
            f"| {labels[other]} | {len(pairs)} | {docs_better} | {other_better} | {ties} | "
            + ("no untied pair" if p is None else f"{p:.3g}")
            + f" | {w_text} | {medians} |"
        )
    return lines


def agreement_lines(rows: list[dict[str, Any]], arms: list[str], labels: dict[str, str]) -> list[str]:
    """Per case and arm, across repeats: the spread (max - min) of the reported number and of its
    signed deviation from the truth. On the same data (``--same-data``) the first is the agent's
    disagreement with itself; on fresh data per repeat the second is the one to read."""
    repeats = {row["repeat"] for row in rows}
    if len(repeats) < 2:
        return []
    same = all(row.get("same_data") for row in rows)
    by_case: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_case[row["case"]][row["arm"]].append(row)
    lines = [
        f"{len(repeats)} repeats, "
        + (
            "all on the same data: a spread is the agent disagreeing with itself."
            if same
            else "each on its own data: the reported number moves with the data, the deviation from the "
            "truth should not (run with `--same-data` to hold the data fixed)."
        ),
        "Each cell: spread (max − min) of the reported number; of the deviation from the truth; answered repeats.",
        "",
        "| case | unit of the error | " + " | ".join(labels[arm] for arm in arms) + " |",
        "|---|---|" + "---|" * len(arms),
    ]
    for case, per_arm in by_case.items():
        unit = next(
            (_md(r["score"]["unit"]) for a in arms for r in per_arm.get(a, []) if isinstance(r.get("score"), dict)),
            "–",
        )
        cells = []
        for arm in arms:
            scored = [r["score"] for r in per_arm.get(arm, []) if isinstance(r.get("score"), dict)]
            if not per_arm.get(arm):
                cells.append("–")
                continue
            reported = [float(s["reported"]) for s in scored]
            deviation = [float(s["reported"]) - float(s["truth"]) for s in scored]
            spread = (
                f"{_fmt(max(reported) - min(reported))}; {_fmt(max(deviation) - min(deviation))}" if scored else "–; –"
            )
            cells.append(f"{spread}; {len(scored)}/{len(per_arm[arm])}")
        lines.append(f"| {case} | {unit} | " + " | ".join(cells) + " |")
    return lines


COST_KEYS = (("calls", "tool calls"), ("executions", "executions"), ("kernel_s", "kernel s"))


def cost_lines(rows: list[dict[str, Any]], arms: list[str], labels: dict[str, str]) -> list[str]:
    """Per arm: the traces' totals divided by the cases solved (and by the runs), and the answer
    characters the agent read (what the docs cost in context)."""
    lines = [
        "From the server's traces (every session of a run): tool calls, executions (`execute_code`), "
        "seconds inside `execute_code` and `poll_job`, and the characters of every answer the agent read "
        "(of those, `read_doc`'s). Per solved case = the arm's total over its passed runs; per run = the mean.",
        "",
        "| arm | solved | "
        + " | ".join(f"{name} per solved (per run)" for _, name in COST_KEYS)
        + " | answer kchars per solved (per run) | read_doc kchars per run |",
        "|---|---|" + "---|" * (len(COST_KEYS) + 2),
    ]
    for arm in arms:
        arm_rows = [row for row in rows if row["arm"] == arm]
        if not arm_rows:
            continue
        solved = sum(row["passed"] for row in arm_rows)
        cells = []
        for key, _ in (*COST_KEYS, ("answer_chars", "")):
            total = sum(float((row.get("cost") or {}).get(key, 0.0)) for row in arm_rows)
            scale = 1000 if key == "answer_chars" else 1
            per_solved = _fmt(total / solved / scale) if solved else "– (none solved)"
            cells.append(f"{per_solved} ({_fmt(total / len(arm_rows) / scale)})")
        docs_chars = sum(float((row.get("cost") or {}).get("read_doc_chars", 0.0)) for row in arm_rows)
        cells.append(_fmt(docs_chars / len(arm_rows) / 1000))
        lines.append(f"| {labels[arm]} | {solved}/{len(arm_rows)} | " + " | ".join(cells) + " |")
    return lines
