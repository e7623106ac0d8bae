"""summary.md from results rows: pass counts per arm, a paired per-case table, docs reading."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

__all__ = ["ARM_LABELS", "headline", "summarize"]

ARM_LABELS = {"docs": "docs", "nodocs": "no docs"}

SCRIPTED_NOTE = (
    "The scripted agent plays each case's known solution: this run validates the harness and the "
    "checks, not the docs' value to a model. That takes a model run (`--agent claude` or a command "
    "template) with an agent CLI and a key."
)


def _arms(rows: list[dict[str, Any]]) -> list[str]:
    return [arm for arm in ARM_LABELS if any(row["arm"] == arm for row in rows)]


def headline(rows: list[dict[str, Any]]) -> str:
    """Pass/fail per arm side by side, as in seed 001: ``docs: 17/3 · no docs: 12/8``."""
    parts = []
    for arm in _arms(rows):
        arm_rows = [row for row in rows if row["arm"] == arm]
        passed = sum(row["passed"] for row in arm_rows)
        parts.append(f"{ARM_LABELS[arm]}: {passed}/{len(arm_rows) - passed}")
    return " · ".join(parts)


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


def summarize(rows: list[dict[str, Any]], *, agent: str, wall_s: float, cases: int, repeat: int) -> str:
    """The markdown summary written next to results.jsonl."""
    arms = _arms(rows)
    lines = [
        f"# Bench run: agent `{agent}`",
        "",
        f"{cases} cases × {len(arms)} arm(s) × {repeat} repeat(s) = {len(rows)} runs in {wall_s:.0f} s. "
        "Pass/fail per arm:",
        "",
        f"**{headline(rows)}**",
        "",
    ]
    errors = [row for row in rows if row["harness_error"]]
    timeouts = sum(row["timed_out"] for row in rows)
    lines.append(f"Harness errors: {len(errors)} · agent timeouts: {timeouts}")
    if agent == "scripted":
        lines += ["", SCRIPTED_NOTE]
    by_case: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_case[row["case"]][row["arm"]].append(row)
    lines += ["", "## Per case (paired: same data in both arms)", ""]
    lines.append("| case | covered by | " + " | ".join(ARM_LABELS[arm] for arm in arms) + " | detail |")
    lines.append("|---|---|" + "---|" * len(arms) + "---|")
    for case, per_arm in by_case.items():
        first = next(iter(per_arm.values()))[0]
        covered = ", ".join(first["covered_by"]) or "(none)"
        seen = {per_arm[arm][-1]["detail"] for arm in arms if per_arm[arm]}
        if len(seen) == 1:
            details = _clip(seen.pop())
        else:
            details = "; ".join(f"{ARM_LABELS[arm]}: {_clip(per_arm[arm][-1]['detail'])}" for arm in arms if per_arm[arm])
        cells = " | ".join(_cell(per_arm[arm]) for arm in arms)
        lines.append(f"| {case} | {covered} | {cells} | {details} |")
    if set(arms) == {"docs", "nodocs"}:
        outcome: Counter[str] = Counter()
        for case, per_arm in by_case.items():
            for with_docs, without in zip(per_arm["docs"], per_arm["nodocs"]):
                key = {(True, True): "both pass", (True, False): "docs only", (False, True): "no docs only"}
                outcome[key.get((with_docs["passed"], without["passed"]), "both fail")] += 1
        lines += [
            "",
            "Pairs: " + " · ".join(f"{name}: {outcome[name]}" for name in ("both pass", "docs only", "no docs only", "both fail")),
        ]
    lines += ["", "## Docs reading (from the server's trace)", "", "| arm | runs that called read_doc | docs read (runs that read it) |", "|---|---|---|"]
    for arm in arms:
        arm_rows = [row for row in rows if row["arm"] == arm]
        readers = sum(row["read_doc_called"] for row in arm_rows)
        share = f"{readers}/{len(arm_rows)} ({100 * readers / len(arm_rows):.0f}%)"
        docs: Counter[str] = Counter()
        for row in arm_rows:
            docs.update(set(row["docs_read"]))
        listed = ", ".join(f"{doc} ×{n}" for doc, n in sorted(docs.items(), key=lambda item: (-item[1], item[0]))) or "none"
        lines.append(f"| {ARM_LABELS[arm]} | {share} | {listed} |")
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
