"""The bench's imaging cases: a request, generated data with known truth, a check, a solution.

Each case module calls :func:`register` at import. A case is plain data plus two functions:

* ``setup(workdir, rng) -> truth`` writes the inputs into a fresh work dir and returns what the
  check needs (arrays allowed); the truth never goes into the work dir, so the agent cannot read it.
* ``check(workdir, truth) -> (passed, detail)`` scores the artifacts the request asked for, with
  the tolerances stated in its detail. A missing or malformed artifact is a failed check, never an
  exception. Beside the verdict the check declares a :class:`Score` (with :func:`score`, as soon
  as it has read the answer's number, or as a third item of its result): the error against the
  truth in the case's own unit, the number the answer reported and the truth. A pass/fail check
  cannot tell a near miss from a wild one, nor an answer at the truth from one at the tolerance's
  edge; the score can. No score means no readable answer, which ranks below every number.

``solution`` is Python source the scripted agent runs through ``execute_code`` with the kernel's
working directory set to the work dir: the known answer, proving that the check can pass.
``docs`` names the docs that cover the case (empty for the cases no procedure covers): shipped
procedures, the lab tier's docs, or the doc a two-session case's first session writes.

A case a shipped procedure covers has a :class:`Procedure` instead of a solution of its own: in
the docs arm the scripted agent reads the procedure's docs through the server and runs their
python blocks as written. Only a prelude that loads the files and passes the inputs, glue that
hands one doc's outputs to the next, and an epilogue that saves in the layout the request asks
for are the case's own code; none of them may call an analysis function (a test checks).

Categories tell what a case needs:

* ``textbook``: a strong model solves it from general knowledge; the docs may help.
* ``lab``: the truth depends on a convention only the lab tier (local docs the bench installs in
  the docs arm) states and the data cannot reveal: pixel size, channel order, a fixed cutoff,
  which objects count, a layout; the images come from the lab's instruments (``scope``).
* ``hard``: the textbook method fails on this data and the procedure's robust method works.
* ``two-session``: session 1's request states a convention and asks the agent to keep it;
  session 2 (a fresh server: on the same config tree in the docs arm, a fresh one without the
  docs) gets a related request without it.
* ``three-session``: memory must do no harm. Session 1 states a rule narrower than a lab rule
  (for one line, one plate), session 2 applies the narrow rule, session 3 needs the lab's
  original rule: it fails when what session 1 wrote replaced the lab's rule instead of adding a
  scoped one beside it.

``why_hidden`` (lab and two-session cases) says why the data cannot reveal what the case needs.

``blind_solution`` is the textbook approach, what an agent that reads no doc would run (the
docs-blind scripted agent): it passes textbook cases and must fail every other category.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CATEGORIES",
    "Case",
    "CheckFailed",
    "Each",
    "Procedure",
    "Run",
    "Score",
    "all_cases",
    "get_case",
    "python_blocks",
    "register",
    "run_check",
    "score",
    "scored_check",
]

CATEGORIES = ("textbook", "lab", "hard", "two-session", "three-session")
"""Case categories, in report order; see the module docstring."""

Truth = dict[str, Any]


@dataclass(frozen=True)
class Score:
    """How far an answer is from the truth, in the case's own unit (0 at the truth)."""

    error: float
    """Distance from the truth, never negative; smaller is better."""
    unit: str
    """The unit of ``error`` (e.g. ``nuclei``, ``|ratio - 1|``, ``1 - NCC``)."""
    reported: float
    """The answer's number the error is measured on (what repeats should agree on)."""
    truth: float
    """That number's true value."""
    limit: float | None = None
    """The check's tolerance on ``error``, when it has one: a pass sits at or under it."""

    def as_row(self) -> dict[str, float | str | None]:
        return {
            "error": self.error,
            "unit": self.unit,
            "reported": self.reported,
            "truth": self.truth,
            "limit": self.limit,
        }


_SCORES: ContextVar[list[Score] | None] = ContextVar("bench_case_scores", default=None)


def score(reported: float, truth: float, unit: str, *, error: float | None = None, limit: float | None = None) -> Score:
    """Declare the running check's score (the last declared wins); the error defaults to
    ``|reported - truth|`` in ``unit``. Called outside a check it only returns the score."""
    found = Score(
        error=float(abs(reported - truth) if error is None else abs(error)),
        unit=unit,
        reported=float(reported),
        truth=float(truth),
        limit=limit,
    )
    declared = _SCORES.get()
    if declared is not None:
        declared.append(found)
    return found


class CheckFailed(Exception):
    """An artifact is missing or wrong; the message is the check's detail."""


_FENCE = re.compile(r"^```(\w*)\s*$")


def python_blocks(text: str) -> list[str]:
    """The fenced python blocks of a doc as read (fences at column 0), in order: what a reader
    following the doc runs."""
    blocks: list[str] = []
    lines: list[str] = []
    language: str | None = None
    for line in text.splitlines():
        if language is None:
            if match := _FENCE.match(line):
                language, lines = match.group(1), []
        elif line.startswith("```"):
            if language == "python":
                blocks.append("\n".join(lines))
            language = None
        else:
            lines.append(line)
    return blocks


@dataclass(frozen=True)
class Run:
    """Run one doc's python blocks, as written, in order."""

    doc: str


@dataclass(frozen=True)
class Each:
    """Run ``steps`` once per pass of a loop ``header`` (e.g. ``for c in range(2):``), all in one cell."""

    header: str
    steps: tuple[str | Run, ...]


Step = str | Run | Each
"""A procedure step: the case's own code (prelude, glue or epilogue), a doc's blocks, or a loop."""


@dataclass(frozen=True)
class Procedure:
    """A covered case's docs-arm solution: shipped docs run as written, between the case's own
    code (a string step), which only loads files, passes inputs and saves what the request asks for."""

    steps: tuple[Step, ...]

    @property
    def docs(self) -> tuple[str, ...]:
        """The docs the steps run, in first-use order: what the agent must read."""
        found: list[str] = []
        for step in self.steps:
            for inner in step.steps if isinstance(step, Each) else (step,):
                if isinstance(inner, Run) and inner.doc not in found:
                    found.append(inner.doc)
        return tuple(found)

    @property
    def own_code(self) -> list[str]:
        """Every piece of the case's own code (prelude, glue, epilogue, loop headers)."""
        code: list[str] = []
        for step in self.steps:
            if isinstance(step, Each):
                code += [step.header + "\n    pass", *(s for s in step.steps if isinstance(s, str))]
            elif isinstance(step, str):
                code.append(step)
        return code

    def cells(self, read: Callable[[str], str]) -> list[str]:
        """The code to run, one cell per step or doc block; ``read(doc_id)`` gives a doc's text."""
        cells: list[str] = []
        for step in self.steps:
            if isinstance(step, Run):
                cells += python_blocks(read(step.doc))
            elif isinstance(step, Each):
                cells.append(_loop_cell(step, read))
            else:
                cells.append(step)
        return cells


def _loop_cell(step: Each, read: Callable[[str], str]) -> str:
    """One cell running the loop: each pass runs the steps' code in the kernel's own namespace."""
    parts: list[str] = []
    for inner in step.steps:
        parts += python_blocks(read(inner.doc)) if isinstance(inner, Run) else [inner]
    return f"_steps = {parts!r}\n{step.header}\n    for _step in _steps:\n        exec(_step, globals())\n"


@dataclass(frozen=True)
class Case:
    """One bench task; see the module docstring for the contract of each field."""

    name: str
    request: str
    setup: Callable[[Path, np.random.Generator], Truth]
    check: Callable[[Path, Truth], tuple[bool, str] | tuple[bool, str, Score]]
    solution: str = ""
    docs: tuple[str, ...] = ()
    category: str = "textbook"
    blind_solution: str | None = None
    first_request: str = ""
    first_solution: str = ""
    memo: tuple[str, str] | None = None
    """Two- and three-session cases: (doc id, body) the scripted agent writes in session 1."""
    second_request: str = ""
    """Three-session cases: session 2's request."""
    second_solution: str = ""
    """Three-session cases: what the scripted agent runs in session 2."""
    procedure: Procedure | None = None
    """Covered cases: the docs-arm solution is this procedure, run from the docs as written."""
    why_hidden: str = ""
    """Lab and two-session cases: why the data cannot reveal what the case needs."""

    @property
    def covered(self) -> bool:
        """Whether a doc covers this case."""
        return bool(self.docs)

    @property
    def sessions(self) -> int:
        return {"two-session": 2, "three-session": 3}.get(self.category, 1)

    def session_request(self, session: int) -> str:
        """The request of session ``session`` (1-based); the last is the scored one."""
        if session >= self.sessions:
            return self.request
        return self.first_request if session == 1 else self.second_request

    def solution_cells(self, read: Callable[[str], str]) -> Sequence[str]:
        """What the docs-driven agent runs: the procedure's cells (docs read with ``read``), else
        the case's solution."""
        return self.procedure.cells(read) if self.procedure is not None else [self.solution]

    @property
    def textbook_solution(self) -> str:
        """What a docs-blind agent runs: the blind solution, else (textbook cases) the solution."""
        return self.solution if self.blind_solution is None else self.blind_solution


_REGISTRY: dict[str, Case] = {}
_MODULES = (
    "nuclei",
    "cells",
    "illumination",
    "stacks",
    "spots",
    "utility",
    "files",
    "tracking",
    "lab",
    "hard",
    "memo",
    "memory",
)


def register(case: Case) -> Case:
    """Add a case; names are unique because results are keyed by them."""
    if case.name in _REGISTRY:
        raise ValueError(f"duplicate bench case {case.name!r}")
    # A scientist's words only: no tool call or doc link that would hand the agent a doc id.
    if any("read_doc" in text or "[[" in text for text in (case.request, case.first_request)):
        raise ValueError(f"case {case.name!r}: the request must not point at a doc")
    if case.category not in CATEGORIES:
        raise ValueError(f"case {case.name!r}: category {case.category!r} is not one of {CATEGORIES}")
    if case.category != "textbook" and case.blind_solution is None:
        raise ValueError(f"case {case.name!r}: a {case.category} case needs the textbook solution that fails it")
    remembers = case.category in ("two-session", "three-session")
    if remembers != (case.memo is not None and bool(case.first_request)):
        raise ValueError(f"case {case.name!r}: multi-session cases, and only they, have a first request and a memo")
    if (case.category == "three-session") != bool(case.second_request):
        raise ValueError(f"case {case.name!r}: three-session cases, and only they, have a second request")
    if case.category in ("lab", "two-session", "three-session") and not case.why_hidden:
        raise ValueError(f"case {case.name!r}: a {case.category} case says why the data cannot reveal what it needs")
    if case.procedure is not None and (case.solution or case.blind_solution is None):
        raise ValueError(
            f"case {case.name!r}: a procedure is the docs-arm solution; the textbook one goes in blind_solution"
        )
    _REGISTRY[case.name] = case
    return case


def _load() -> None:
    for module in _MODULES:
        importlib.import_module(f"{__name__}.{module}")


def all_cases() -> list[Case]:
    """Every registered case, module by module (in ``_MODULES`` order), each in registration order."""
    _load()  # every module, even when one was imported first on its own (imports are cached)
    order = {f"{__name__}.{module}": i for i, module in enumerate(_MODULES)}
    return sorted(_REGISTRY.values(), key=lambda case: order.get(case.setup.__module__, len(order)))


def get_case(name: str) -> Case:
    """The case called ``name``.

    Raises:
        KeyError: no such case; the message lists the known names.
    """
    cases = {case.name: case for case in all_cases()}
    if name not in cases:
        raise KeyError(f"unknown bench case {name!r}; known: {', '.join(cases)}")
    return cases[name]


def run_check(case: Case, workdir: Path, truth: Truth) -> tuple[bool, str]:
    """Run a case's check, turning CheckFailed into a failed result with its message."""
    passed, detail, _ = scored_check(case, workdir, truth)
    return passed, detail


def scored_check(case: Case, workdir: Path, truth: Truth) -> tuple[bool, str, Score | None]:
    """Run a case's check: its verdict, detail and the score it declared (None: no readable answer)."""
    declared: list[Score] = []
    token = _SCORES.set(declared)
    try:
        result: tuple[Any, ...] = tuple(case.check(workdir, truth))
    except CheckFailed as exc:
        result = (False, str(exc))
    finally:
        _SCORES.reset(token)
    found = result[2] if len(result) > 2 else (declared[-1] if declared else None)
    return bool(result[0]), str(result[1]), found
