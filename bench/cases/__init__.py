"""The bench's imaging cases: a request, generated data with known truth, a check, a solution.

Each case module calls :func:`register` at import. A case is plain data plus two functions:

* ``setup(workdir, rng) -> truth`` writes the inputs into a fresh work dir and returns what the
  check needs (arrays allowed); the truth never goes into the work dir, so the agent cannot read it.
* ``check(workdir, truth) -> (passed, detail)`` scores the artifacts the request asked for, with
  the tolerances stated in its detail. A missing or malformed artifact is a failed check, never an
  exception.

``solution`` is Python source the scripted agent runs through ``execute_code`` with the kernel's
working directory set to the work dir: the known answer, proving that the check can pass.
``docs`` names the shipped docs that cover the case (empty for the cases no procedure covers).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Case", "CheckFailed", "all_cases", "get_case", "register", "run_check"]

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
    tags: tuple[str, ...] = field(default=())

    @property
    def covered(self) -> bool:
        """Whether a shipped procedure covers this case."""
        return bool(self.docs)


_REGISTRY: dict[str, Case] = {}
_MODULES = ("nuclei", "illumination", "stacks", "spots", "utility")


def register(case: Case) -> Case:
    """Add a case; names are unique because results are keyed by them."""
    if case.name in _REGISTRY:
        raise ValueError(f"duplicate bench case {case.name!r}")
    # A scientist's words only: no tool call or doc link that would hand the agent a doc id.
    if "read_doc" in case.request or "[[" in case.request:
        raise ValueError(f"case {case.name!r}: the request must not point at a doc")
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
