"""Tests for docs search: tokenizing, sectioning, ranking of literals, freshness, and errors."""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from biopb_mcp.docs.search.fts import FtsIndex, digest
from biopb_mcp.docs.search.query import (
    Hit,
    search_docs,
    snippet,
    split_sections,
    tokenize,
    warm_index,
)
from biopb_mcp.docs.search.ranking import score_all
from biopb_mcp.docs.search.sections import atoms, compounds
from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.views import Origin
from biopb_mcp.errors import InvalidQuery
from biopb_mcp.fs import stamps
from biopb_mcp.text.doc_views import read_doc

# ---------------------------------------------------------------------------------------------
# Corpus generator, reusable by the perf harness (bench/): `bench_corpus` and `time_search`.

_WORDS = (
    "image mask label segment threshold nucleus cell channel stack plane pixel intensity "
    "background foreground filter gaussian median otsu watershed region property area "
    "volume tile pyramid level viewer layer kernel job output result array dtype shape axis "
    "scale spacing microscope sample field stain contrast histogram peak distance marker "
    "seed border object count measure table export file path napari dask zarr chunk"
).split()
_LITERALS = (
    "ValueError: operands could not be broadcast together",
    "kernel.promote_after",
    "skimage.filters.threshold_otsu",
    "MemoryError: Unable to allocate",
    "docs.history_keep",
    "scipy.ndimage.distance_transform_edt",
)


_CORPUS_MTIME = 1_700_000_000
"""Generated docs get this old mtime: like a real tier (not edited this second), and deterministic."""


def bench_corpus(directory: Path, total_bytes: int, n_docs: int, *, seed: int = 0) -> list[str]:
    """Write ``n_docs`` markdown docs totalling about ``total_bytes`` under ``directory``.

    Each doc has a title, a lead paragraph, `##` sections, a fenced code block and now and then a
    literal (exception line, dotted key, function name); mtimes are set in the past. Returns
    queries fit for timing: plain words, word pairs and literals, some matching few sections.
    Deterministic per seed; the total lands within a few percent of ``total_bytes``.
    """
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = _WORDS + [f"{w}{i}" for i in range(400) for w in ("term", "param")]
    weights = [1.0 / (rank + 1) ** 0.8 for rank in range(len(vocab))]
    per_doc = max(200, total_bytes // n_docs)

    def sentence() -> str:
        words = rng.choices(vocab, weights, k=rng.randint(8, 18))
        return " ".join(words).capitalize() + "."

    for n in range(n_docs):
        group = f"g{n % 50:02d}"
        parts = [f"---\ndescription: {sentence()}\n---\n# Doc {n} {rng.choice(_WORDS)}\n", sentence()]
        size = sum(map(len, parts))
        section = 0
        while True:
            section += 1
            block = [f"\n## Step {section}: {rng.choice(_WORDS)} {rng.choice(_WORDS)}\n"]
            block += [sentence() for _ in range(rng.randint(2, 5))]
            if rng.random() < 0.3:
                block.append("```python\n## not a heading\nresult = f(image, sigma=2)\n```")
            if rng.random() < 0.05:
                block.append(f"If you see `{rng.choice(_LITERALS)}`, check the input.")
            text = "\n".join(block)
            if section > 1 and size + len(text) // 2 > per_doc:
                break  # stop nearest the target rather than always past it
            parts.append(text)
            size += len(text)
        path = directory / group / f"doc{n:05d}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(parts) + "\n", encoding="utf-8")
        os.utime(path, (_CORPUS_MTIME, _CORPUS_MTIME))
    return [
        "otsu",
        "gaussian filter sigma",
        "watershed marker distance",
        "term17",
        "param250 scale",
        "image",
        *_LITERALS,
        "napari layer viewer",
        "pyramid level tile",
        "chunk zarr dask",
        "histogram peak",
        "missing-word-nowhere",
        "border object count",
        "stain contrast",
    ]


def time_search(store: object, queries: list[str], rounds: int = 1) -> tuple[float, list[float]]:
    """Seconds for the first (cold) query, then for each further query over ``rounds`` passes."""
    start = time.perf_counter()
    search_docs(store, queries[0])  # type: ignore[arg-type]
    cold = time.perf_counter() - start
    warm: list[float] = []
    for _ in range(rounds):
        for query in queries:
            start = time.perf_counter()
            search_docs(store, query)  # type: ignore[arg-type]
            warm.append(time.perf_counter() - start)
    return cold, warm


# ---------------------------------------------------------------------------------------------
# Pure parts: tokenizer, sectioning, index ranking, snippets.


def test_tokenize_keeps_dotted_and_underscored_literals_whole_and_in_parts() -> None:
    tokens = tokenize("Use skimage.filters.threshold_otsu, or set kernel.promote_after = 10.")
    for token in (
        "skimage.filters.threshold_otsu",
        "threshold_otsu",
        "threshold",
        "otsu",
        "kernel.promote_after",
        "promote_after",
        "promote",
        "after",
        "kernel",
        "10",
    ):
        assert token in tokens
    assert tokenize("ValueError: Operands") == ["valueerror", "operands"]


def test_split_sections_uses_title_for_lead_and_ignores_headings_in_code() -> None:
    text = (
        "---\ndescription: d\n---\n# Segment nuclei\nLead words.\n\n## Threshold\nOtsu here.\n"
        "```bash\n## a shell comment, not a heading\n```\n## Watershed ##\nMarkers.\n"
    )
    sections = split_sections("seg/nuclei", text)
    assert [h for h, _ in sections] == ["Segment nuclei", "Threshold", "Watershed"]
    assert "a shell comment" in sections[1][1]
    assert sections[2][1].startswith("## Watershed")
    assert [h for h, _ in split_sections("plain", "No title here.\n## A\nx")] == ["plain", "A"]
    assert [h for h, _ in split_sections("empty-lead", "## Only\nx")] == ["Only"]


def _set(index: FtsIndex, doc_id: str, text: str) -> None:
    with index.writing():
        index.put("tier", doc_id, (0, 0, len(text)), digest(text), True, lambda: split_sections(doc_id, text))


def _index(docs: dict[str, str]) -> FtsIndex:
    index = FtsIndex(None)
    for doc_id, text in docs.items():
        _set(index, doc_id, text)
    return index


def _top(index: FtsIndex, query: str, n: int = 5) -> list[tuple[str, str]]:
    """The index's candidates for ``query``, scored as search scores them (no titles known)."""
    every = index.row_ids(index.rows())
    found = index.candidates(query, every, 50)
    stats = index.stats(list(dict.fromkeys(atoms(query))), list(dict.fromkeys(compounds(query))))
    return [(s.section.doc_id, s.section.heading) for s in score_all(found, query, stats, set())][:n]


LITERAL_CORPUS = {
    "numpy-errors": (
        "# Numpy errors\nArrays, operands, broadcast rules, values.\n\n"
        "## Shapes\nOperands must broadcast; a value error could come from operands whose shapes "
        "could not broadcast. Operands operands broadcast broadcast value error.\n\n"
        "## The broadcast error\nValueError: operands could not be broadcast together with "
        "shapes (3,) (4,)\nFix the axis order.\n"
    ),
    "kernel": (
        "# Kernel\nThe kernel promotes jobs. Kernel kernel promote after promote after.\n\n"
        "## Config\nSet kernel.promote_after to the seconds before a run becomes a job.\n"
    ),
    "threshold": (
        "# Thresholding\nThreshold otsu threshold otsu threshold otsu otsu filters.\n\n"
        "## API\nCall skimage.filters.threshold_otsu(image) and compare.\n"
    ),
}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ValueError: operands could not be broadcast", ("numpy-errors", "The broadcast error")),
        ("kernel.promote_after", ("kernel", "Config")),
        ("skimage.filters.threshold_otsu", ("threshold", "API")),
        ("threshold_otsu", ("threshold", "API")),
        ("Error: operands could not", ("numpy-errors", "The broadcast error")),
    ],
)
def test_literal_finds_its_section_first_over_term_heavy_sections(query: str, expected: tuple[str, str]) -> None:
    index = _index(LITERAL_CORPUS)
    assert _top(index, query)[0] == expected


def test_words_rank_by_term_frequency_and_unknown_words_match_nothing() -> None:
    index = _index(LITERAL_CORPUS)
    assert _top(index, "otsu")[0] == ("threshold", "Thresholding")
    assert _top(index, "zebrafish nowhere") == []
    assert len(_top(index, "kernel", n=1)) == 1


def test_a_word_found_nowhere_whole_finds_the_words_it_starts() -> None:
    index = _index({**LITERAL_CORPUS, "authoring": "# Authoring\n\n## Checkpoints\nName them in headings.\n"})
    assert _top(index, "checkpoint") == [("authoring", "Checkpoints")]
    assert _top(index, "otsu")[0] == ("threshold", "Thresholding")  # whole words come first


def test_index_replacing_a_doc_forgets_its_old_words() -> None:
    index = _index(LITERAL_CORPUS)
    for round_ in range(100):
        _set(index, "kernel", f"# Kernel\nword{round_} here\n")
    assert _top(index, "word99") == [("kernel", "Kernel")]
    assert _top(index, "word98") == []
    assert _top(index, "promote_after") == []
    assert _top(index, "kernel.promote_after") == [("kernel", "Kernel")]  # by "kernel" alone
    assert _top(index, "threshold_otsu")[0] == ("threshold", "API")
    with index.writing():
        index.drop([("tier", "kernel")])
    assert _top(index, "word99") == []


def test_snippet_is_one_line_around_the_exact_match() -> None:
    text = "filler words " * 40 + "\nValueError: operands could not\nbe broadcast together\n" + "tail " * 60
    cut = snippet(text, "valueerror: operands could not be broadcast")
    assert "\n" not in cut
    assert "ValueError: operands could not be broadcast" in cut
    assert cut.startswith("…") and cut.endswith("…")
    assert len(cut) <= 260
    dense = snippet("a " * 300 + "otsu mask otsu mask " + "b " * 300, "mask otsu")
    assert "otsu mask otsu mask" in dense


# ---------------------------------------------------------------------------------------------
# Through a real DocStore over real tiers in tmp dirs.


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def tiers(tmp_path: Path) -> tuple[Path, Path]:
    """A small shipped tier (with an index, a banked doc and one doc the local tier shadows)."""
    shipped, local = tmp_path / "shipped", tmp_path / "local"
    _write(
        shipped / "index.md",
        "# biopb docs\n\n## References\n- kernel: run code\n- numpy-errors: fix errors\n"
        # lines for the local docs the tests below write, so search surfaces them
        "\n## Lab\n- notes: my notes\n- fine: fine\n- binary: binary\n- many/: many docs\n- notes/: notes\n",
    )
    _write(shipped / "kernel.md", LITERAL_CORPUS["kernel"] + "\n## Shipped only\nzebrafish shippedword\n")
    _write(shipped / "numpy-errors.md", LITERAL_CORPUS["numpy-errors"])
    _write(shipped / "_banked/thresholds.md", LITERAL_CORPUS["threshold"])
    local.mkdir()
    return shipped, local


@pytest.fixture
def store(tiers: tuple[Path, Path]) -> DocStore:
    shipped, local = tiers
    return DocStore(local, shipped_dir=shipped, version="1.0")


def _ids(hits: list[Hit]) -> list[tuple[str, str]]:
    return [(h.doc_id, h.heading) for h in hits]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ValueError: operands could not be broadcast", ("numpy-errors", "The broadcast error")),
        ("kernel.promote_after", ("kernel", "Config")),
        ("Fix the axis order", ("numpy-errors", "The broadcast error")),
    ],
)
def test_store_search_puts_the_literal_section_first(store: DocStore, query: str, expected: tuple[str, str]) -> None:
    hits = search_docs(store, query)
    assert _ids(hits)[0] == expected
    assert hits[0].origin == "shipped"
    assert query.lower() in hits[0].snippet.lower()
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_shadowed_shipped_doc_is_searched_in_its_local_text_only(store: DocStore, tiers: tuple[Path, Path]) -> None:
    assert _ids(search_docs(store, "shippedword")) == [("kernel", "Shipped only")]
    _write(tiers[1] / "kernel.md", "# Kernel, my notes\n\n## Mine\nlocalword and kernel.promote_after = 30\n")
    assert search_docs(store, "shippedword") == []
    hits = search_docs(store, "kernel.promote_after")
    assert (hits[0].doc_id, hits[0].heading, hits[0].origin) == ("kernel", "Mine", Origin.SHADOW)
    assert "Config" not in {h.heading for h in hits}  # the shipped text's section is gone
    assert search_docs(store, "localword")[0].origin == Origin.SHADOW


def test_nested_local_docs_under_a_listed_folder_are_searched_but_not_hidden_files(
    store: DocStore, tiers: tuple[Path, Path]
) -> None:
    local = tiers[1]
    _write(local / "notes/scratch.md", "# Scratch\nunlistedword lives here\n")
    _write(local / ".history/notes/scratch/1.md", "hiddenword\n")
    _write(local / "notes/.scratch.md.1234.abcd.tmp", "hiddenword\n")  # write_atomic's temp name
    _write(local / "notes/.hidden.md", "hiddenword\n")
    _write(local / ".shipped-manifest.json", '{"hiddenword": 1}')
    hits = search_docs(store, "unlistedword")
    assert [(h.doc_id, h.origin) for h in hits] == [("notes/scratch", "local")]
    assert search_docs(store, "hiddenword") == []


def test_search_covers_only_what_the_index_surfaces(store: DocStore, tiers: tuple[Path, Path]) -> None:
    """Ignored, banked and unindexed docs are readable by exact id, never found by search."""
    local = tiers[1]
    _write(local / "scratch.md", "# Scratch\nunlistedword lives here\n")
    assert search_docs(store, "unlistedword") == []
    assert search_docs(store, "skimage.filters.threshold_otsu") == []  # banked
    assert "unlistedword" in read_doc(store, "scratch")
    assert "threshold_otsu" in read_doc(store, "_banked/thresholds")
    assert _ids(search_docs(store, "kernel.promote_after"))[0] == ("kernel", "Config")
    index = (local / "index.md").read_text(encoding="utf-8")
    store.write_doc("index", body=index.replace("- kernel: run code\n", "") + "\nignored: kernel\n- scratch: mine\n")
    assert search_docs(store, "kernel.promote_after") == []
    assert "promote_after" in read_doc(store, "kernel")
    assert _ids(search_docs(store, "unlistedword")) == [("scratch", "Scratch")]


def test_search_sees_a_hand_edit_and_a_write_doc_at_once(
    store: DocStore, tiers: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stamps, "RACY_NS", 3600 * 10**9)  # the doc stays recent however slow the first search
    path = tiers[1] / "notes.md"
    _write(path, "# Notes\nalphaword\n")
    assert _ids(search_docs(store, "alphaword")) == [("notes", "Notes")]
    # In place, same size, same mtime (as within one coarse timestamp tick): the (inode, mtime,
    # size) key cannot tell, so a recently modified doc must be re-read and compared.
    before = path.stat()
    with open(path, "r+", encoding="utf-8") as fh:
        fh.write("# Notes\nbetawords\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert search_docs(store, "alphaword") == []
    assert _ids(search_docs(store, "betawords")) == [("notes", "Notes")]
    store.write_doc("notes", body="# Notes\ngammaword\n")
    kept = [f for f in (tiers[1] / ".history").rglob("*") if f.is_file() and "betawords" in f.read_text()]
    assert kept, "history keeps the replaced text; search must not surface it"
    assert search_docs(store, "betawords") == []
    assert _ids(search_docs(store, "gammaword")) == [("notes", "Notes")]
    path.unlink()
    assert search_docs(store, "gammaword") == []


def test_unreadable_doc_is_skipped_with_a_warning(
    store: DocStore, tiers: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    local = tiers[1]
    (local / "binary.md").write_bytes(b"\xff\xfe\x00 not utf-8 otsu")
    _write(local / "fine.md", "# Fine\notsu here\n")
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.search.query"):
        hits = search_docs(store, "otsu")
    assert "binary" not in {h.doc_id for h in hits}
    assert "fine" in {h.doc_id for h in hits}
    assert any("binary" in r.getMessage() for r in caplog.records)
    (local / "binary.md").write_text("# Binary\nnow readable otsu otsu otsu\n", encoding="utf-8")
    assert "binary" in {h.doc_id for h in search_docs(store, "otsu")}


def test_warm_index_reads_every_doc_ahead_of_the_first_search(store: DocStore) -> None:
    assert warm_index(store) == len(store.surfaced_ids()) == 2  # the banked doc is not searched
    assert _ids(search_docs(store, "kernel.promote_after"))[0] == ("kernel", "Config")


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_a_clear_error(store: DocStore, query: str) -> None:
    with pytest.raises(InvalidQuery, match="empty"):
        search_docs(store, query)


@pytest.mark.parametrize("max_results", [0, 51, -1, True, 2.5])
def test_max_results_outside_1_to_50_is_refused(store: DocStore, max_results: object) -> None:
    with pytest.raises(InvalidQuery, match="1 to 50"):
        search_docs(store, "otsu", max_results)  # type: ignore[arg-type]


def test_max_results_bounds_the_hits(store: DocStore, tiers: tuple[Path, Path]) -> None:
    for n in range(8):
        _write(tiers[1] / f"many/doc{n}.md", f"# Doc {n}\ncommonword\n")
    assert len(search_docs(store, "commonword", 3)) == 3
    assert len(search_docs(store, "commonword", 50)) == 8


def test_search_over_a_generated_corpus_finds_each_literal(tmp_path: Path) -> None:
    local = tmp_path / "local"
    queries = bench_corpus(local, 200_000, 100)
    groups = sorted(path.name for path in local.iterdir())
    (local / "index.md").write_text("".join(f"- {group}/: docs\n" for group in groups), encoding="utf-8")
    corpus_store = DocStore(local, shipped_dir=tmp_path / "no-shipped", version="1.0")
    texts = {doc_id: corpus_store.doc_text(doc_id)[0] for doc_id in corpus_store.shelf.doc_ids()}
    found = 0
    for literal in _LITERALS:
        holders = {doc_id for doc_id, text in texts.items() if literal in text}
        hits = search_docs(corpus_store, literal, 50)
        if holders:
            found += 1
            assert hits[0].doc_id in holders
            assert literal in hits[0].snippet
            assert {h.doc_id for h in hits[: len(holders)]} <= holders
    assert found >= 4  # the generator really plants literals
    cold, warm = time_search(corpus_store, queries)
    assert cold > 0 and len(warm) == len(queries)


def test_concurrent_searches_and_writes_stay_consistent(store: DocStore) -> None:
    """The server runs tools in worker threads: searches racing writes never fail or mix docs."""
    import threading

    errors: list[BaseException] = []

    def searcher() -> None:
        try:
            for _ in range(30):
                for hit in search_docs(store, "racedoc"):
                    assert hit.doc_id.startswith("race/")
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for thread in threads:
        thread.start()
    for n in range(20):
        store.write_doc(f"race/d{n}", body=f"# Race {n}\nracedoc number {n}\n")
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert len(search_docs(store, "racedoc", 50)) == 20


def test_a_hits_score_does_not_depend_on_how_many_hits_are_asked_for(store: DocStore, tiers: tuple[Path, Path]) -> None:
    """The same section scored 3.758 with max_results=2 and 9.252 with 10: the phrase hits were
    lifted by the best other hit, and with 2 asked for there was none."""
    for n in range(3):
        _write(
            tiers[1] / f"many/phrase{n}.md",
            f"# Phrase {n}\n\n## Use\nSet the camera offset {n} before flat-fielding.\n",
        )
    for n in range(6):
        _write(tiers[1] / f"many/words{n}.md", f"# Words {n}\n\n## Notes\noffset of the camera, offset {n}, camera\n")
    few, many = search_docs(store, "camera offset", 2), search_docs(store, "camera offset", 10)
    assert [(h.doc_id, h.heading) for h in few] == [(h.doc_id, h.heading) for h in many[:2]]
    by_section = {(h.doc_id, h.heading): h.score for h in many}
    for hit in few:
        assert hit.score == by_section[(hit.doc_id, hit.heading)]
    assert many == sorted(many, key=lambda h: -h.score)


def test_a_doc_titled_or_hooked_with_the_query_outranks_body_mentions(
    store: DocStore, tiers: tuple[Path, Path]
) -> None:
    """ "Scope pixel size" ranked 5th for `pixel size` under docs that only mention it."""
    shipped, local = tiers
    for n in range(6):
        _write(
            local / f"many/mention{n}.md",
            f"# Imaging notes {n}\n\n## Calibration\n"
            + "The pixel size matters; check the pixel size. " * (n + 2)
            + "\n",
        )
    _write(local / "many/scope.md", "# Scope pixel size\n\nOur scope: 0.325 µm per pixel at 20x.\n")
    _write(local / "notes.md", "# Lab notes\n\nMeasured once: size of a pixel on camera B.\n")  # hook below names it
    index = (shipped / "index.md").read_text().replace("- notes: my notes", "- notes: pixel size of camera B")
    _write(local / "index.md", index)
    hits = search_docs(store, "pixel size", 10)
    assert {h.doc_id for h in hits[:2]} == {"many/scope", "notes"}, [(h.doc_id, h.score) for h in hits]
    assert all(h.score < hits[1].score for h in hits[2:])


def test_a_query_past_its_time_budget_is_refused_with_its_budget_and_the_query(
    store: DocStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What to search for instead is text/'s (test_doc_messages checks the sentence)."""
    from biopb_mcp.docs.search import query as search_mod
    from biopb_mcp.errors import DocProblem

    assert search_docs(store, "operands could not be broadcast")  # the index is built: refresh is not timed
    monkeypatch.setattr(search_mod, "QUERY_BUDGET_S", 0.0)
    with pytest.raises(InvalidQuery, match=r"was stopped after 0 s") as caught:
        search_docs(store, "operands could not be broadcast")
    assert caught.value.kind is DocProblem.QUERY_TOO_COSTLY
    assert caught.value.details == {"limit": 0.0, "shown": "'operands could not be broadcast'"}
    monkeypatch.undo()
    assert search_docs(store, "operands could not be broadcast")[0].doc_id == "numpy-errors"


def test_a_long_query_expands_only_a_few_long_words_as_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every word of a pasted passage expanded as a prefix ("a*", "of*", "to*") merged most of the
    vocabulary: ordinary long queries took seconds on 5,000 docs."""
    index = _index(LITERAL_CORPUS)
    seen: list[str] = []
    real = FtsIndex._scored

    def recording(self: FtsIndex, match: str, ranges: list[tuple[int, int]]) -> Iterator[int]:
        seen.append(match)
        return real(self, match, ranges)

    monkeypatch.setattr(FtsIndex, "_scored", recording)
    query = "a value error of this kind is what you get to see when operands of two shapes do not line up"
    _top(index, query)
    prefixes = [m for m in seen if " *" in m]
    assert prefixes, seen
    expanded = [w for m in prefixes for w in m.split('"')[1::2]]
    assert len(expanded) <= 4 and all(len(w) >= 4 for w in expanded), expanded


def test_a_long_query_is_matched_as_a_phrase_of_a_few_words_around_its_rarest(monkeypatch: pytest.MonkeyPatch) -> None:
    """FTS5 matches a phrase inside one row without yielding to the query's deadline, at a cost of
    the row's length times the phrase's: 249 words against a megabyte of one word took seconds
    past the budget. The whole query is still confirmed on the section's text."""
    from biopb_mcp.docs.search import fts

    index = _index(LITERAL_CORPUS)
    seen: list[str] = []
    real = FtsIndex._unscored

    def recording(self: FtsIndex, match: str, ranges: list[tuple[int, int]], cap: int = fts.RANK_CAP) -> Iterator[int]:
        seen.append(match)
        return real(self, match, ranges, cap)

    monkeypatch.setattr(FtsIndex, "_unscored", recording)
    query = "Error: operands could not be broadcast together with shapes (3,) (4,)\nFix the axis order"
    assert _top(index, query)[0] == ("numpy-errors", "The broadcast error")
    phrases = [m.split('"')[1].split() for m in seen]
    assert phrases and all(len(p) <= fts.PHRASE_WORDS for p in phrases), phrases
    assert all("fix" in p for p in phrases)  # its rarest word (one section holds it) is in every phrase


def test_a_rule_kept_in_the_index_prose_is_found_as_hit_index(store: DocStore, tiers: tuple[Path, Path]) -> None:
    """An agent keeps a lab rule as a section of the index itself: search finds it there."""
    index = (tiers[0] / "index.md").read_text(encoding="utf-8")
    store.write_doc(
        "index", body=index + "\n## Lab rules\nAreas are always reported in square microns, never pixels.\n"
    )
    hits = search_docs(store, "square microns")
    assert [(h.doc_id, h.heading, h.origin) for h in hits] == [("index", "Lab rules", "local")]
    assert "square microns" in hits[0].snippet
    store.write_doc("index", old="square microns", new="um2")  # an edit is seen by the next search
    assert search_docs(store, "square microns") == []


def test_the_index_entries_and_ignored_ids_are_not_its_searched_text(store: DocStore, tiers: tuple[Path, Path]) -> None:
    """Entry lines are found through their docs; an ignored id must never resurface through the
    index (the docs-off bench arm ignores the procedures); a heading with no prose under it would
    outrank the docs on its one word."""
    index = (tiers[0] / "index.md").read_text(encoding="utf-8")
    store.write_doc(
        "index",
        body=index.replace("- fine: fine\n", "- fine: hookonlyword\n")
        + "\nignored: hiddenprocedure\n\n## Emptyheadingword\n",
    )
    assert search_docs(store, "hookonlyword") == []  # no doc "fine" exists: its line alone is not searched
    assert search_docs(store, "hiddenprocedure") == []
    assert search_docs(store, "Emptyheadingword") == []
    assert [h.doc_id for h in search_docs(store, "kernel.promote_after")][:1] == ["kernel"]
