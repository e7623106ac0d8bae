"""The bench's imaging cases: a request, generated data with known truth, a check, a solution.

Each case module calls :func:`register` at import. A case is plain data plus two functions:

* ``setup(workdir, rng) -> truth`` writes the inputs into a fresh work dir and returns what the
  check needs (arrays allowed); the truth never goes into the work dir, so the agent cannot read it.
* ``check(workdir, truth) -> (passed, detail)`` scores the artifacts the request asked for, with
  the tolerances stated in its detail. A missing or malformed artifact is a failed check, never an
  exception.

``solution`` is Python source the scripted agent runs through ``execute_code`` with the kernel's
working directory set to the work dir: the known answer, proving that the check can pass.
``docs`` names the docs that cover the case (empty for the cases no procedure covers): shipped
procedures, the lab tier's docs, or the doc a two-session case's first session writes.

Categories tell what a case needs:

* ``textbook``: a strong model solves it from general knowledge; the docs may help.
* ``lab``: the truth depends on a convention only the lab tier (local docs the bench installs in
  the docs arm) states: pixel size, camera offset, channel order, what counts as positive.
* ``hard``: the textbook method fails on this data and the procedure's robust method works.
* ``two-session``: session 1's request states a convention and asks the agent to keep it;
  session 2 (a fresh server on the same config tree) gets a related request without it.

``blind_solution`` is the textbook approach, what an agent that reads no doc would run (the
docs-blind scripted agent): it passes textbook cases and must fail every other category.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CATEGORIES", "Case", "CheckFailed", "all_cases", "get_case", "register", "run_check"]

CATEGORIES = ("textbook", "lab", "hard", "two-session")
"""Case categories, in report order; see the module docstring."""

Truth = dict[str, Any]


class CheckFailed(Exception):
    """An artifact is missing or wrong; the message is the check's detail."""


@dataclass(frozen=True)
class Case:
    """One bench task; see the module docstring for the contract of each field."""

    name: str
    request: str
    setup: Callable[[Path, np.random.Generator], Truth]
    check: Callable[[Path, Truth], tuple[bool, str]]
    solution: str
    docs: tuple[str, ...] = ()
    category: str = "textbook"
    blind_solution: str | None = None
    first_request: str = ""
    first_solution: str = ""
    memo: tuple[str, str] | None = None
    """Two-session cases: (doc id, body) the scripted agent writes in session 1."""

    @property
    def covered(self) -> bool:
        """Whether a doc covers this case."""
        return bool(self.docs)

    @property
    def sessions(self) -> int:
        return 2 if self.category == "two-session" else 1

    @property
    def textbook_solution(self) -> str:
        """What a docs-blind agent runs: the blind solution, else (textbook cases) the solution."""
        return self.solution if self.blind_solution is None else self.blind_solution


_REGISTRY: dict[str, Case] = {}
_MODULES = ("nuclei", "illumination", "stacks", "spots", "utility", "lab", "hard", "memo")


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
    if (case.category == "two-session") != (case.memo is not None and bool(case.first_request)):
        raise ValueError(f"case {case.name!r}: two-session cases, and only they, have a first request and a memo")
    _REGISTRY[case.name] = case
    return case


def _load() -> None:
    for module in _MODULES:
        importlib.import_module(f"{__name__}.{module}")


def all_cases() -> list[Case]:
    """Every registered case, in registration order."""
    if not _REGISTRY:
        _load()
    return list(_REGISTRY.values())


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
    try:
        return case.check(workdir, truth)
    except CheckFailed as exc:
        return False, str(exc)
