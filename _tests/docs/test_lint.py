"""`docs check` warnings: links that land nowhere, hooks a rewrite left behind; never problems."""

from __future__ import annotations

from pathlib import Path

import pytest

from biopb_mcp.cli.commands import main
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.lint import Finding, Lint
from biopb_mcp.docs.store import DocStore


@pytest.fixture
def store() -> DocStore:
    """The store `biopb-mcp docs check` reads (the isolated config dir's local tier)."""
    return DocStore(load_settings().docs_local_dir)


def check(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["docs", "check"])
    return code, capsys.readouterr().out


def test_the_shipped_seed_gives_no_link_or_hook_warning(store: DocStore) -> None:
    assert store.check_warnings() == []


def test_a_dangling_link_in_a_local_doc_is_a_warning_not_a_problem(
    store: DocStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store.write_doc(
        "lab/scope",
        body="# Our scope\n\nSubtract the offset first: [[camera-offset]]. "
        "See [[kernel]], [[kernel@diff]] and `[[quoted-example]]`.\n"
        "Again [[camera-offset]].\n",
    )
    warnings = [w for w in store.check_warnings() if w.kind is Lint.DANGLING_LINK]
    assert warnings == [Finding(Lint.DANGLING_LINK, {"doc_id": "lab/scope", "target": "camera-offset"})]
    assert not store.check()
    code, out = check(capsys)
    said = (
        "local: lab/scope links [[camera-offset]], which is no doc in either tier; write camera-offset, or fix "
        "the link (a dangling link is allowed)."
    )
    assert code == 0 and f"warning: {said}\n" in out and "no problems; 1 warning(s)" in out


def test_a_hook_that_no_longer_matches_its_rewritten_doc_is_a_warning(
    store: DocStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store.write_doc("lab/camera", body="# Camera offset\n\nSubtract 100 from every raw pixel before measuring.\n")
    store.write_doc(
        "index",
        old="- lab/camera: Subtract 100 from every raw pixel before measuring.",
        new="- lab/camera: subtract our camera's offset before measuring intensities",
    )
    assert store.check_warnings() == []
    store.write_doc("lab/camera", body="# Pixel size\n\nThe 40x objective gives 0.16 um per pixel.\n")
    warnings = store.check_warnings()
    line = next(
        i
        for i, text in enumerate(Path(store.shelf.index_path).read_text().splitlines(), 1)
        if text.startswith("- lab/camera:")
    )
    hook = "subtract our camera's offset before measuring intensities"
    assert warnings == [
        Finding(
            Lint.STALE_HOOK,
            {
                "line": line,
                "doc_id": "lab/camera",
                "hook": hook,
                "title": "Pixel size",
                "description": "The 40x objective gives 0.16 um per pixel.",
            },
        )
    ], warnings
    code, out = check(capsys)
    assert code == 0 and f"warning: index line {line}: the hook of lab/camera ({hook!r}) shares no word" in out
    assert "'Pixel size'" in out and "update the line to say when to use it now." in out
