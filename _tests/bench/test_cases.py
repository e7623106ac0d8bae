"""Every case's check fails on an empty work dir (with no score) and passes on its solution run in a
real kernel, its score within the check's tolerance; the textbook solution of every lab and
two-session case (and of one hard case) fails its check, its score worse than that tolerance (or
no readable answer), so each needs a doc; a case a shipped procedure covers is solved by that procedure's blocks as written, its
own code only loading files, passing inputs and saving."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

from _tests.support.prepared_trees import (
    LAB_DIR,
    LAB_SECTION,
    PROCEDURES_HEADING,
    ablate_index,
    shipped_index_path,
)
from _tests.support.seedlib import builtin_plugins
from bench.cases import Case, Score, all_cases, get_case, python_blocks, run_check, scored_check
from bench.cases._kit import read_number

CASES = all_cases()
# Every lab and two-session case, and one hard case: `python -m bench selftest` runs the textbook
# solution of every hard case too (as the docs-blind agent); the suite samples those, which are slow.
NEEDS_DOCS = [case for case in CASES if case.category in ("lab", "two-session", "three-session")] + [
    next(case for case in CASES if case.category == "hard")
]


def test_cases_per_category() -> None:
    assert len({case.name for case in CASES}) == len(CASES)
    counts = {
        category: sum(case.category == category for case in CASES)
        for category in ("textbook", "lab", "hard", "two-session", "three-session")
    }
    assert counts["three-session"] >= 1
    assert counts["textbook"] == 26 and counts["lab"] >= 12 and counts["hard"] >= 4 and counts["two-session"] >= 6
    assert sum(not case.covered for case in CASES) >= 3


def test_every_doc_a_case_names_exists_where_its_category_says() -> None:
    procedures = set(ablate_index(shipped_index_path().read_text(encoding="utf-8")).withheld)
    lab = {f"lab/{path.stem}" for path in LAB_DIR.glob("*.md")}
    for case in CASES:
        if case.category in ("textbook", "hard"):
            assert set(case.docs) <= procedures, (
                f"{case.name}: not under {PROCEDURES_HEADING}: {set(case.docs) - procedures}"
            )
        elif case.category == "lab":
            assert case.docs and set(case.docs) <= lab, case.name
        elif case.category == "three-session":
            # session 3 follows a lab rule; session 1's memo must sit beside it, not in its place
            assert case.memo is not None and case.docs and set(case.docs) <= lab, case.name
            assert case.memo[0] not in case.docs, case.name
        else:
            assert case.memo is not None and case.docs == (case.memo[0],), case.name
    assert all(f"- {doc_id}:" in LAB_SECTION for doc_id in lab)


SECRETS = (
    "0.26",
    "0.1625",
    "0.65",
    "0.442",
    "500",
    "100 ms",
    "per 100",
    "channel 0",
    "channel 1",
    "channel 2",
    "index",
    "1000",
    "2.5",
    "800",
    "40 µm",
    "results/",
    "border",
    "edge",
    "top",
    "left",
    "frame",
    "snake",
    "down column",
    "30 s",
    "every 30",
    "2 min",
    ";",
    "comma",
    "centre",
    "center",
    "median",
    "mCherry, Cy5",
)


def test_no_request_states_the_convention_its_case_needs() -> None:
    for case in CASES:
        if case.category in ("lab", "two-session", "three-session"):
            for secret in SECRETS:
                assert secret not in case.request, f"{case.name}: the request gives away {secret!r}"
            assert len(case.why_hidden) > 40, f"{case.name}: say why the data cannot reveal what it needs"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_check_fails_on_an_empty_work_dir(case, tmp_path: Path) -> None:
    truth = case.setup(tmp_path, np.random.default_rng(1))
    inputs = sorted(path.name for path in tmp_path.iterdir())
    passed, detail, score = scored_check(case, tmp_path, truth)
    assert not passed
    assert "missing" in detail
    assert score is None  # no answer, no number: it ranks below every scored answer
    assert sorted(path.name for path in tmp_path.iterdir()) == inputs  # a check writes nothing


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlockingKernelClient]:
    """One real kernel for all solutions (this Python), its IPython dir kept in a tmp dir, with the
    built-in plugins (the save helpers, show) every kernel the server starts has."""
    home = tmp_path_factory.mktemp("kernel")
    plugin_env, plugin_args = builtin_plugins()
    env = {
        **os.environ,
        **plugin_env,
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_RUNTIME_DIR": str(home / "rt"),
        "MPLBACKEND": "Agg",
    }
    manager: KernelManager
    manager, client = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60, extra_arguments=plugin_args)
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(kernel: BlockingKernelClient, tmp_path: Path, code: str, *, reset: bool = True) -> None:
    outputs: list[str] = []

    def keep(message: dict) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            outputs.append(content["text"])
        elif message["msg_type"] == "error":
            outputs.append("\n".join(content["traceback"]))

    # a clean namespace per solution, so one case's imports cannot hide another's missing ones
    code = ("%reset -f\n" if reset else "") + f"import os\nos.chdir({str(tmp_path)!r})\n" + code
    reply = kernel.execute_interactive(code, timeout=120, output_hook=keep)
    assert reply["content"]["status"] == "ok", "".join(outputs)


def shipped(doc_id: str) -> str:
    """A shipped doc's text (or a lab doc's, from the lab tier the docs arm installs)."""
    if doc_id.startswith("lab/"):
        return (LAB_DIR / f"{doc_id.removeprefix('lab/')}.md").read_text(encoding="utf-8")
    return (shipped_index_path().parent / f"{doc_id}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_solution_run_in_a_kernel_passes_the_check(case, kernel: BlockingKernelClient, tmp_path: Path) -> None:
    """The docs arm's solution, in one namespace: a covered case's is its procedure's blocks as written."""
    truth = case.setup(tmp_path, np.random.default_rng(1))
    for earlier in (case.first_solution, case.second_solution):
        if earlier:
            _run(kernel, tmp_path, earlier)
    _run(kernel, tmp_path, "")
    for cell in case.solution_cells(shipped):
        _run(kernel, tmp_path, cell, reset=False)
    passed, detail, score = scored_check(case, tmp_path, truth)
    assert passed, detail
    assert score is not None and score.limit is not None, f"{case.name} declares no score with its tolerance"
    assert score.error <= score.limit + 1e-9, f"{case.name}: {score}"


PROCEDURES = set(ablate_index(shipped_index_path().read_text(encoding="utf-8")).withheld)
COVERED = [case for case in CASES if set(case.docs) & PROCEDURES]
OWN_CODE_IMPORTS = {"numpy", "tifffile", "csv", "os", "pathlib"}
OWN_CODE_CALLS = {
    # loading files and passing inputs
    "tifffile.imread",
    "tifffile.TiffFile",
    "np.stack",
    "np.asarray",
    "np.array",
    "np.arange",
    "Path",
    "range",
    "len",
    "int",
    "float",
    "str",
    "list",
    "dict",
    "zip",
    "enumerate",
    "print",
    # saving in the layout the request asks for, through the outputs helpers or plainly
    "open",
    "out_path",
    "save_table",
    "save_labels",
    "save_image",
    "tifffile.imwrite",
    "np.savetxt",
    "csv.writer",
}
OWN_CODE_METHODS = {"asarray", "take", "index", "append", "write", "writerow", "writerows", "tolist"}


def analysis_calls(code: str) -> list[str]:
    """Calls and imports in a case's own code that are not file loading, input passing or saving."""
    found: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [f"import {m}" for m in modules if m.split(".")[0] not in OWN_CODE_IMPORTS]
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name not in OWN_CODE_CALLS and not (method in OWN_CODE_METHODS and name not in ("np." + method,)):
                found.append(name)
    return found


def test_every_covered_case_is_solved_by_its_procedure_as_written() -> None:
    """A covered case passes through the shipped procedure's blocks, not its own analysis: it has a
    Procedure running the docs that cover it, and its prelude, glue and epilogue call nothing but
    file loading, input passing and saving."""
    assert len(COVERED) >= 20
    problems: list[str] = []
    for case in COVERED:
        if case.procedure is None:
            problems.append(f"{case.name}: covered by {case.docs} but solved by its own code")
            continue
        missing = set(case.docs) - set(case.procedure.docs)
        if missing:
            problems.append(f"{case.name}: the procedure does not run {sorted(missing)}")
        for code in case.procedure.own_code:
            bad = analysis_calls(code)
            if bad:
                problems.append(f"{case.name}: its own code calls {bad}")
        if not all(python_blocks(shipped(doc)) for doc in case.procedure.docs):
            problems.append(f"{case.name}: a doc it runs has no python block")
    assert not problems, "\n".join(problems)


def test_the_own_code_check_sees_analysis() -> None:
    """The check above would see a case doing the analysis itself."""
    assert analysis_calls("from skimage import filters\nt = filters.threshold_otsu(img)") == [
        "import skimage",
        "filters.threshold_otsu",
    ]
    assert analysis_calls("m = np.percentile(img, 50)\nx = img.max()") == ["np.percentile", "img.max"]
    assert analysis_calls('import tifffile\nimage = tifffile.imread("a.tif")\nsave_table({"n": [1]}, "x")') == []


def test_a_procedure_case_keeps_a_textbook_solution_for_the_arm_without_docs() -> None:
    for case in COVERED:
        assert isinstance(case, Case) and case.blind_solution, f"{case.name}: no textbook solution"


@pytest.mark.parametrize("case", NEEDS_DOCS, ids=lambda case: case.name)
def test_textbook_solution_fails_every_case_that_needs_a_doc(
    case, kernel: BlockingKernelClient, tmp_path: Path
) -> None:
    truth = case.setup(tmp_path, np.random.default_rng(1))
    if case.first_solution:
        _run(kernel, tmp_path, case.first_solution)
    _run(kernel, tmp_path, case.textbook_solution)
    passed, detail, score = scored_check(case, tmp_path, truth)
    assert not passed, detail
    # worse than the tolerance the case's own solution meets, or no readable answer at all
    assert score is None or (score.limit is not None and score.error > score.limit), f"{case.name}: {score}"


def test_a_check_may_return_its_score_or_declare_it() -> None:
    """The protocol: a check's third item is its score; else the last one it declared; the error is
    never negative and defaults to the distance from the truth."""
    from bench.cases import score

    def declaring(workdir: Path, truth: dict) -> tuple[bool, str]:
        score(3, 5, "nuclei", limit=1)
        score(7, 5, "nuclei", limit=1)
        return False, "off"

    returning = Score(error=0.0, unit="nuclei", reported=5, truth=5, limit=1)
    case = Case("protocol-probe", "count", lambda workdir, rng: {}, declaring)
    assert scored_check(case, Path("."), {})[2] == Score(error=2.0, unit="nuclei", reported=7, truth=5, limit=1)
    case = Case("protocol-probe", "count", lambda workdir, rng: {}, lambda workdir, truth: (True, "ok", returning))
    assert scored_check(case, Path("."), {}) == (True, "ok", returning)
    assert score(0.9, 1.0, "1 - r", error=-0.1).error == 0.1


def test_the_scripted_agent_can_read_every_doc_a_case_needs_in_the_docs_arm_only(tmp_path: Path) -> None:
    """The scripted agent plays a case's docs-arm solution only when the handshake lists every doc
    it needs: the docs arm lists them all (a memo once session 1 wrote it), the ablated arm none."""
    from _tests.support.prepared_trees import prepare_tree
    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.docs.store import DocStore

    served = {}
    for arm in (True, False):
        settings = load_settings(prepare_tree(tmp_path / str(arm), bench_docs=arm).root)
        served[arm] = set(DocStore(settings.docs_local_dir, withhold=settings.docs.withhold).listed_ids())
    for case in CASES:
        needed = set(case.docs) | set(case.procedure.docs if case.procedure else ())
        memo = {case.memo[0]} if case.memo else set()
        assert needed - memo <= served[True], case.name
        if case.category != "textbook":
            assert not (set(case.docs) - memo) & served[False], case.name


@pytest.mark.parametrize(
    ("name", "answer", "wrong"),
    [
        ("nucleus-area-um2", "area_px", "an area in pixels (1 µm per pixel assumed)"),
        ("bleach-rate-per-second", "per_frame", "a rate per frame (the interval ignored)"),
        ("count-in-named-channel", "channel_0", "the count of channel 0 (the names ignored)"),
    ],
)
def test_a_file_metadata_case_fails_an_answer_that_ignores_the_file(
    tmp_path: Path, name: str, answer: str, wrong: str
) -> None:
    """The answer an agent gives without reading the file's pixel size, interval or channel names fails."""
    from skimage import filters, measure

    case = get_case(name)
    truth = case.setup(tmp_path, np.random.default_rng(1))
    if answer == "area_px":
        artifact, value = "nucleus_area_um2.txt", truth["area_px"]
    elif answer == "per_frame":
        artifact, value = "bleach_rate.txt", truth["rate"] * 2.5
    else:
        first = __import__("tifffile").imread(tmp_path / "cells.ome.tif")[0].astype(float)
        artifact, value = "nuclei_count.txt", measure.label(first > filters.threshold_otsu(first)).max()
    (tmp_path / artifact).write_text(f"{value}\n", encoding="utf-8")
    passed, detail = run_check(case, tmp_path, truth)
    assert not passed, f"{wrong} passed: {detail}"
    assert read_number(tmp_path / artifact) == pytest.approx(float(value))
