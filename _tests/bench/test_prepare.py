"""Ablation trees: the no-docs arm lists no procedure, withholds them all, keeps every reference, and
the handshake of a real server started on it shows no procedure id; the docs arm is the seed
unchanged plus the lab tier."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from _tests.support.prepared_trees import (
    PROCEDURES_HEADING,
    ConfigTree,
    ablate_index,
    prepare_tree,
    shipped_index_path,
    with_lab_section,
)
from bench.__main__ import main
from bench.prepare import write_mcp_config
from biopb_mcp.config.settings import load_settings
from biopb_mcp.docs.search.query import search_docs, tokenize
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocNotFound
from biopb_mcp.text.index import render_index


def _sections(text: str) -> dict[str, list[str]]:
    """Entry ids per ``##`` heading, read independently of the tree preparation."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line.strip()
        elif match := re.match(r"^- ([A-Za-z0-9._/-]+):", line):
            sections.setdefault(current, []).append(match.group(1))
    return sections


SEED = shipped_index_path().read_text(encoding="utf-8")
PROCEDURES = _sections(SEED)[PROCEDURES_HEADING]
REFERENCES = _sections(SEED)["## References"]


def _mentions(text: str, doc_id: str) -> bool:
    return re.search(rf"(?<![\w/-]){re.escape(doc_id)}(?![\w/-])", text) is not None


def test_seed_has_procedures_and_references() -> None:
    assert len(PROCEDURES) >= 5 and len(REFERENCES) >= 2


def test_ablated_index_has_no_procedure_entry_and_keeps_every_reference() -> None:
    ablation = ablate_index(SEED)
    entries = [doc_id for ids in _sections(ablation.text).values() for doc_id in ids]
    assert not set(entries) & set(PROCEDURES)
    assert set(REFERENCES) <= set(entries)
    assert ablation.withheld == PROCEDURES
    assert not [doc_id for doc_id in PROCEDURES if _mentions(ablation.text, doc_id)]


def test_ablation_drops_withheld_ids_from_the_ignored_line_and_keeps_prose() -> None:
    text = "# i\n\n## Procedures\n- a: do a\nKeep this prose.\n### Sub\n- b: do b\n## Other\n- c: see c\n\nignored: z, a\nignored: y\n"
    ablation = ablate_index(text)
    assert ablation.withheld == ["a", "b"]
    assert ablation.kept == ["c"]
    assert ablation.text.endswith("\nignored: z, y\n")
    assert "Keep this prose." in ablation.text and "- c: see c" in ablation.text


def test_ablation_refuses_an_index_without_the_procedures_heading() -> None:
    with pytest.raises(ValueError, match="Procedures"):
        ablate_index("# i\n- a: x\n")


def _served(tree: ConfigTree) -> DocStore:
    """The store a server started on the tree serves (its config read as the server reads it)."""
    settings = load_settings(tree.root)
    return DocStore(settings.docs_local_dir, withhold=settings.docs.withhold)


def test_store_on_an_ablated_tree_lists_no_procedure_and_reads_none(tmp_path: Path) -> None:
    tree = prepare_tree(tmp_path / "nodocs", bench_docs=False)
    store = _served(tree)
    assert sorted(store.shelf.withheld) == sorted(PROCEDURES) == sorted(tree.withheld)
    listed = store.listed_ids()
    assert not set(listed) & set(PROCEDURES)
    assert set(REFERENCES) <= set(listed)
    rendered = render_index(store)
    assert not [doc_id for doc_id in PROCEDURES if _mentions(rendered, doc_id)]
    for doc_id in PROCEDURES:
        with pytest.raises(DocNotFound):
            store.view(doc_id)


def test_docs_off_search_finds_no_procedure_by_any_word_of_its_title_or_body(tmp_path: Path) -> None:
    tree = prepare_tree(tmp_path / "nodocs", bench_docs=False)
    store = _served(tree)
    words: set[str] = set()
    for doc_id in PROCEDURES:
        words.update(tokenize(DocStore(tree.docs_dir).doc_text(doc_id)[0]))
    assert len(words) > 200
    found = {hit.doc_id for word in sorted(words) for hit in search_docs(store, word, 50)}
    assert not found & set(PROCEDURES)
    assert found  # the references are still searched
    assert not (tree.docs_dir / "lab").exists()  # the lab tier is the docs arm's alone


def test_docs_arm_tree_is_the_seed_plus_the_lab_tier_and_isolated(tmp_path: Path) -> None:
    tree = prepare_tree(tmp_path / "docs", bench_docs=True)
    assert (tree.docs_dir / "index.md").read_text(encoding="utf-8") == with_lab_section(SEED)
    store = DocStore(tree.docs_dir)
    assert {"lab/microscope", "lab/positive-cells", "lab/debris-gate", "lab/results-layout"} <= set(store.listed_ids())
    assert set(PROCEDURES) <= set(store.listed_ids())
    assert store.check() == []
    config = (tree.root / "config.toml").read_text(encoding="utf-8")
    for key in ("state_dir", "runtime_dir", "log_file"):
        assert f'{key} = "{tree.root}' in config
    write_mcp_config(tmp_path / "mcp.json", tree, tmp_path / "t.jsonl")
    server = json.loads((tmp_path / "mcp.json").read_text(encoding="utf-8"))["mcpServers"]["biopb"]
    assert server["args"][-2:] == ["--trace", str(tmp_path / "t.jsonl")]
    env = server["env"]
    assert all(
        value.startswith(str(tree.root))
        for key, value in env.items()
        if key.startswith(("XDG_", "BIOPB_", "JUPYTER_", "IPYTHON"))
    )
    with pytest.raises(FileExistsError):
        prepare_tree(tmp_path / "docs", bench_docs=True)


def test_prepare_command_writes_the_ablated_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", "--bench-docs=false", "--out", str(tmp_path / "t")]) == 0
    assert "withhold = [" in (tmp_path / "t" / "config.toml").read_text(encoding="utf-8")
    assert main(["prepare", "--bench-docs=false", "--out", str(tmp_path / "t")]) == 2
    assert "not empty" in capsys.readouterr().err


async def _handshakes(tmp_path: Path) -> dict[bool, str]:
    """The instructions real stdio servers started on a docs tree and an ablated tree send."""
    found: dict[bool, str] = {}

    async def one(bench_docs: bool) -> None:
        tree = prepare_tree(tmp_path / f"tree-{bench_docs}", bench_docs=bench_docs)
        spec = write_mcp_config(tmp_path / f"{bench_docs}.json", tree, tmp_path / f"{bench_docs}.jsonl")
        server = spec["mcpServers"]["biopb"]  # type: ignore[index]
        env = {**server["env"], **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
        params = StdioServerParameters(command=server["command"], args=server["args"], env=env, cwd=str(tmp_path))
        async with Client(params, read_timeout_seconds=30) as client:
            found[bench_docs] = client.instructions or ""

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(one, True)
            group.start_soon(one, False)
    return found


@pytest.fixture(scope="module")
def handshakes(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, str]:
    """Both arms' handshakes, fetched once for the tests below (two server starts, not six)."""
    return anyio.run(_handshakes, tmp_path_factory.mktemp("handshakes"))


def test_handshake_on_the_docs_tree_lists_every_procedure(handshakes: dict[bool, str]) -> None:
    assert all(_mentions(handshakes[True], doc_id) for doc_id in PROCEDURES + REFERENCES)


def test_handshake_on_the_ablated_tree_lists_no_procedure_and_keeps_the_references(handshakes: dict[bool, str]) -> None:
    instructions = handshakes[False]
    assert all(_mentions(instructions, doc_id) for doc_id in REFERENCES)
    entries = [m.group(1) for m in re.finditer(r"^- ([A-Za-z0-9._/-]+):", instructions, re.MULTILINE)]
    assert not set(entries) & set(PROCEDURES)


def test_handshake_on_the_ablated_tree_shows_no_procedure_id(handshakes: dict[bool, str]) -> None:
    assert [doc_id for doc_id in PROCEDURES if _mentions(handshakes[False], doc_id)] == []
