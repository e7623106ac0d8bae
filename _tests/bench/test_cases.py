"""Every case's check fails on an empty work dir and passes on its solution run in a real kernel."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

from bench.cases import all_cases, run_check
from bench.prepare import PROCEDURES_HEADING, ablate_index, shipped_index_path

CASES = all_cases()


def test_there_are_twenty_cases_with_a_few_no_procedure_covers() -> None:
    assert len(CASES) == 20
    assert len({case.name for case in CASES}) == 20
    assert sum(not case.covered for case in CASES) >= 3


def test_every_doc_a_case_names_is_a_shipped_procedure() -> None:
    procedures = set(ablate_index(shipped_index_path().read_text(encoding="utf-8")).moved)
    named = {doc for case in CASES for doc in case.docs}
    assert named <= procedures, f"not under {PROCEDURES_HEADING}: {named - procedures}"


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


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_solution_run_in_a_kernel_passes_the_check(case, kernel: BlockingKernelClient, tmp_path: Path) -> None:
    truth = case.setup(tmp_path, np.random.default_rng(1))
    outputs: list[str] = []

    def keep(message: dict) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            outputs.append(content["text"])
        elif message["msg_type"] == "error":
            outputs.append("\n".join(content["traceback"]))

    # a clean namespace per solution, so one case's imports cannot hide another's missing ones
    code = f"%reset -f\nimport os\nos.chdir({str(tmp_path)!r})\n" + case.solution
    reply = kernel.execute_interactive(code, timeout=60, output_hook=keep)
    assert reply["content"]["status"] == "ok", "".join(outputs)
    passed, detail = run_check(case, tmp_path, truth)
    assert passed, detail

