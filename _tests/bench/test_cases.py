"""Every case's check fails on an empty work dir and passes on its solution run in a real kernel; the
textbook solution of every lab, hard and two-session case fails its check (so each needs a doc)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

from bench.cases import all_cases, run_check
from bench.prepare import (
    LAB_DIR,
    LAB_SECTION,
    PROCEDURES_HEADING,
    ablate_index,
    shipped_index_path,
)

CASES = all_cases()
# One case per category that needs a doc: `python -m bench selftest` runs the textbook solution of
# every one of them (as the docs-blind agent); the suite keeps to a sample for time.
NEEDS_DOCS = [next(case for case in CASES if case.category == category) for category in ("lab", "hard", "two-session")]


def test_cases_per_category() -> None:
    assert len({case.name for case in CASES}) == len(CASES)
    counts = {category: sum(case.category == category for case in CASES) for category in ("textbook", "lab", "hard", "two-session")}
    assert counts["textbook"] == 20 and counts["lab"] >= 6 and counts["hard"] >= 4 and counts["two-session"] >= 3
    assert sum(not case.covered for case in CASES) >= 3


def test_every_doc_a_case_names_exists_where_its_category_says() -> None:
    procedures = set(ablate_index(shipped_index_path().read_text(encoding="utf-8")).moved)
    lab = {f"lab/{path.stem}" for path in LAB_DIR.glob("*.md")}
    for case in CASES:
        if case.category in ("textbook", "hard"):
            assert set(case.docs) <= procedures, f"{case.name}: not under {PROCEDURES_HEADING}: {set(case.docs) - procedures}"
        elif case.category == "lab":
            assert case.docs and set(case.docs) <= lab, case.name
        else:
            assert case.memo is not None and case.docs == (case.memo[0],), case.name
    assert all(f"- {doc_id}:" in LAB_SECTION for doc_id in lab)


def test_no_request_states_the_convention_its_case_needs() -> None:
    for case in CASES:
        if case.category in ("lab", "two-session"):
            for secret in ("0.325", "500", "channel 2", "1000", "40 µm", "results/", "border", "30 s", "every 30", "channel 1"):
                assert secret not in case.request, f"{case.name}: the request gives away {secret!r}"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_check_fails_on_an_empty_work_dir(case, tmp_path: Path) -> None:
    truth = case.setup(tmp_path, np.random.default_rng(1))
    inputs = sorted(path.name for path in tmp_path.iterdir())
    passed, detail = run_check(case, tmp_path, truth)
    assert not passed
    assert "missing" in detail
    assert sorted(path.name for path in tmp_path.iterdir()) == inputs  # a check writes nothing


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlockingKernelClient]:
    """One real kernel for all solutions (this Python), its IPython dir kept in a tmp dir."""
    home = tmp_path_factory.mktemp("kernel")
    env = {**os.environ, "IPYTHONDIR": str(home / "ipython"), "JUPYTER_RUNTIME_DIR": str(home / "rt"), "MPLBACKEND": "Agg"}
    manager: KernelManager
    manager, client = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(kernel: BlockingKernelClient, tmp_path: Path, code: str) -> None:
    outputs: list[str] = []

    def keep(message: dict) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            outputs.append(content["text"])
        elif message["msg_type"] == "error":
            outputs.append("\n".join(content["traceback"]))

    # a clean namespace per solution, so one case's imports cannot hide another's missing ones
    code = f"%reset -f\nimport os\nos.chdir({str(tmp_path)!r})\n" + code
    reply = kernel.execute_interactive(code, timeout=60, output_hook=keep)
    assert reply["content"]["status"] == "ok", "".join(outputs)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_solution_run_in_a_kernel_passes_the_check(case, kernel: BlockingKernelClient, tmp_path: Path) -> None:
    truth = case.setup(tmp_path, np.random.default_rng(1))
    if case.first_solution:
        _run(kernel, tmp_path, case.first_solution)
    _run(kernel, tmp_path, case.solution)
    passed, detail = run_check(case, tmp_path, truth)
    assert passed, detail


@pytest.mark.parametrize("case", NEEDS_DOCS, ids=lambda case: case.name)
def test_textbook_solution_fails_every_case_that_needs_a_doc(case, kernel: BlockingKernelClient, tmp_path: Path) -> None:
    truth = case.setup(tmp_path, np.random.default_rng(1))
    if case.first_solution:
        _run(kernel, tmp_path, case.first_solution)
    _run(kernel, tmp_path, case.textbook_solution)
    passed, detail = run_check(case, tmp_path, truth)
    assert not passed, detail

