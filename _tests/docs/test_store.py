"""DocStore on real files: tiers, read/write rules, caps, rendering, hand edits, processes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from _tests.support.write_reports import as_agent_reads
from biopb_mcp.docs import BODY_MAX_LINES, FILE_MAX_BYTES, INDEX_MAX_ENTRIES
from biopb_mcp.docs.index import parse
from biopb_mcp.docs.lint import Finding, Lint
from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.views import Origin
from biopb_mcp.errors import DocNotFound, DocProblem, DocUnreadable, InvalidDocId, Unreadable, WriteRefused
from biopb_mcp.fs import stamps
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.docs import FOR_AGENT
from biopb_mcp.text.index import NEW_TAIL_HEADING, STALE_TAIL_HEADING, render_index

SHIPPED_INDEX = """# biopb docs

## References
- kernel: namespace, jobs, where computes run
- authoring: how to write a doc

## Procedures
- flatfield: correct uneven illumination
- stitch-tiles: assemble a grid of tiles
- designs/: the engine's design docs

ignored: smlm
"""

SHIPPED = {
    "kernel": "---\ndescription: The kernel\n---\n# Kernel\n\nOne kernel per server.\n",
    "authoring": "# Authoring\n\nHow to write docs.\n",
    "flatfield": "# Flatfield\n\nCorrect uneven illumination.\n\n1. estimate\n2. divide\n",
    "stitch-tiles": "# Stitch\n\nAssemble tiles.\n",
    "smlm": "# SMLM\n\nResolution of localisation data.\n",
    "_banked": "# Banked\n\nThin evidence.\n",
    "extra/new-thing": "---\ndescription: A doc the index does not list yet\n---\n# New\n",
}


def make_shipped(root: Path, docs: dict[str, str] = SHIPPED, index: str = SHIPPED_INDEX) -> Path:
    """A shipped tier on disk: index.md plus one file per id."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "index.md").write_text(index)
    for doc_id, text in docs.items():
        path = root / f"{doc_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for directories): to prove nothing changed."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes() if not os.path.islink(path) else b"link"
    return out


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    return make_shipped(tmp_path / "shipped")


@pytest.fixture
def store(tmp_path: Path, shipped: Path) -> DocStore:
    return DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0")


def test_constructor_touches_no_disk_and_first_access_seeds_the_index(tmp_path: Path, shipped: Path) -> None:
    store = DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0")
    assert not (tmp_path / "local").exists()
    rendered = render_index(store)
    assert (tmp_path / "local" / "index.md").read_text() == SHIPPED_INDEX
    assert rendered.startswith(SHIPPED_INDEX.rstrip("\n"))
    assert (tmp_path / "local" / ".shipped-manifest.json").is_file()


def test_local_tier_is_private(store: DocStore) -> None:
    store.write_doc("mine", body="# Mine\n\nA procedure.\n")
    assert stat.S_IMODE(store.local_dir.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE((store.local_dir / "mine.md").stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE((store.local_dir / ".history").stat().st_mode) & 0o077 == 0


def test_read_doc_has_a_one_line_header_with_origin_and_updated(store: DocStore) -> None:
    out = read_doc(store, "kernel")
    header, rest = out.split("\n\n", 1)
    assert "\n" not in header
    # a shipped file's mtime is the install or clone time: the header names the release instead
    assert header == "kernel — shipped with biopb-mcp 1.0"
    assert rest == SHIPPED["kernel"]
    store.write_doc("kernel", old="One kernel", new="Exactly one kernel")
    header = read_doc(store, "kernel", FOR_AGENT).split("\n", 1)[0]
    assert "local (shadows shipped)" in header and 'read_doc("kernel@diff")' in header
    # without a reader's vocabulary the store names no tool
    assert read_doc(store, "kernel").split("\n", 1)[0] == header.split(";", 1)[0]
    assert store.doc_text("kernel") == (SHIPPED["kernel"].replace("One", "Exactly one"), Origin.SHADOW)


def test_updated_frontmatter_overrides_the_mtime(store: DocStore) -> None:
    store.write_doc("dated", body="---\nupdated: 2025-12-24\n---\n# Dated\n\nText.\n")
    assert read_doc(store, "dated").split("\n", 1)[0] == "dated — local, updated 2025-12-24"
    assert store.info("dated").updated == "2025-12-24"


def test_unknown_id_names_the_closest_ids(store: DocStore) -> None:
    with pytest.raises(DocNotFound) as exc_info:
        read_doc(store, "flatfeild")
    assert exc_info.value.suggestions[0] == "flatfield"
    assert "flatfield" in str(exc_info.value)


def test_body_write_creates_a_local_doc_and_files_it_under_unfiled(store: DocStore) -> None:
    result = as_agent_reads(
        store.write_doc("my-lab/nuclei", body="# Nuclei\n\nSegment nuclei in a 3D stack.\n\n1. a\n2. b\n")
    )
    assert result.created and result.changed
    assert "+# Nuclei" in result.text
    assert "+## Unfiled" in result.text and "+- my-lab/nuclei: Segment nuclei in a 3D stack." in result.text
    index_text = (store.local_dir / "index.md").read_text()
    assert index_text.endswith("## Unfiled\n- my-lab/nuclei: Segment nuclei in a 3D stack.\n\nignored: smlm\n")
    assert store.doc_text("my-lab/nuclei")[1] == Origin.LOCAL
    second = as_agent_reads(store.write_doc("other", body="---\ndescription: merge two channels\n---\n# Other\n"))
    assert "+- other: merge two channels" in second.text
    assert (store.local_dir / "index.md").read_text().count("## Unfiled") == 1


def test_replace_changes_exactly_one_occurrence_and_returns_the_diff(store: DocStore) -> None:
    store.write_doc("proc", body="# Proc\n\nstep one\nstep two\n")
    result = as_agent_reads(store.write_doc("proc", old="step two", new="step 2"))
    assert not result.created and result.changed
    assert "-step two\n+step 2" in result.text
    assert (store.local_dir / "proc.md").read_text() == "# Proc\n\nstep one\nstep 2\n"


@pytest.mark.parametrize(("old", "says"), [("absent text", "0 matches"), ("step", "matches 2 times")])
def test_replace_matching_zero_or_two_times_is_refused_and_changes_nothing(
    store: DocStore, old: str, says: str
) -> None:
    store.write_doc("proc", body="# Proc\n\nstep one\nstep two\n")
    before = snapshot(store.local_dir)
    with pytest.raises(WriteRefused, match=says):
        store.write_doc("proc", old=old, new="x")
    assert snapshot(store.local_dir) == before


@pytest.mark.parametrize(
    ("kwargs", "says", "kind"),
    [
        ({}, "got neither", DocProblem.ARGS_NEITHER),
        ({"body": "# x\n", "old": "a", "new": "b"}, "not both", DocProblem.ARGS_BOTH),
        ({"old": "a"}, "got only old", DocProblem.ARGS_HALF),
        ({"new": "b"}, "got only new", DocProblem.ARGS_HALF),
        ({"body": "   \n"}, "body is empty", DocProblem.BODY_EMPTY),  # the advice (no delete) is text/'s
        ({"old": "", "new": "b"}, "old is empty", DocProblem.OLD_EMPTY),
    ],
)
def test_other_argument_combinations_are_refused(
    store: DocStore, kwargs: dict[str, str], says: str, kind: DocProblem
) -> None:
    render_index(store)
    before = snapshot(store.local_dir)
    with pytest.raises(WriteRefused, match=says) as caught:
        store.write_doc("kernel", **kwargs)
    assert caught.value.kind is kind
    assert snapshot(store.local_dir) == before


def test_replace_on_a_missing_doc_is_not_found(store: DocStore) -> None:
    with pytest.raises(DocNotFound, match="create it with body"):
        store.write_doc("nope", old="a", new="b")


def test_write_to_a_shipped_id_creates_a_shadow_and_leaves_the_shipped_file_alone(store: DocStore) -> None:
    shipped_file = store.shipped_dir / "flatfield.md"
    before_bytes, before_mtime = shipped_file.read_bytes(), shipped_file.stat().st_mtime_ns
    result = as_agent_reads(store.write_doc("flatfield", old="2. divide", new="2. divide by the flat"))
    assert result.created and "shadows the shipped text" in result.text
    assert "--- flatfield (shipped)" in result.text and "+2. divide by the flat" in result.text
    assert "already has an entry" in result.text
    assert shipped_file.read_bytes() == before_bytes and shipped_file.stat().st_mtime_ns == before_mtime
    assert (store.local_dir / "flatfield.md").read_text() == SHIPPED["flatfield"].replace(
        "divide", "divide by the flat"
    )
    assert "- flatfield: correct uneven illumination (local copy)" in render_index(store)
    diff = read_doc(store, "flatfield@diff")
    assert "mixes your own edits with the release's changes" in diff
    assert "-2. divide\n+2. divide by the flat" in diff
    assert parse((store.local_dir / "index.md").read_text()).entry_count == 5  # no duplicate entry


def test_a_write_that_changes_nothing_says_so_and_writes_nothing(store: DocStore) -> None:
    store.write_doc("proc", body="# Proc\n\ntext\n")
    before = snapshot(store.local_dir)
    result = as_agent_reads(store.write_doc("proc", body="# Proc\n\ntext\n"))
    assert not result.changed and result.text.startswith("No change")
    same_as_shipped = as_agent_reads(store.write_doc("kernel", body=SHIPPED["kernel"]))
    assert not same_as_shipped.changed and "no local copy was made" in same_as_shipped.text
    assert snapshot(store.local_dir) == before


@pytest.mark.parametrize("bad_id", ["../x", "/abs", "a//b", "a/./b", ".hidden", "x@diff", "index/", "kernel@v1"])
def test_bad_ids_are_refused_and_nothing_is_written_anywhere(tmp_path: Path, store: DocStore, bad_id: str) -> None:
    render_index(store)
    before = snapshot(tmp_path)
    with pytest.raises(InvalidDocId):
        store.write_doc(bad_id, body="# Evil\n\ntext\n")
    with pytest.raises(InvalidDocId):
        store.write_doc(bad_id, old="a", new="b")
    assert snapshot(tmp_path) == before


def test_symlinks_leaving_the_tier_are_refused_for_read_and_write(tmp_path: Path, store: DocStore) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n")
    render_index(store)
    os.symlink(outside / "secret.md", store.local_dir / "evil.md")
    os.symlink(outside, store.local_dir / "linked")
    before = snapshot(outside)
    for doc_id in ("evil", "linked/new"):
        with pytest.raises(InvalidDocId, match="outside the docs tier"):
            read_doc(store, doc_id)
        with pytest.raises(InvalidDocId, match="outside the docs tier"):
            store.write_doc(doc_id, body="# Pwned\n")
    assert snapshot(outside) == before
    assert "evil" not in store.shelf.doc_ids()


def test_index_edit_reaching_201_entries_is_refused_and_unchanged(store: DocStore) -> None:
    lines = "\n".join(f"- doc{i}: hook {i}" for i in range(INDEX_MAX_ENTRIES))
    ok = as_agent_reads(store.write_doc("index", body=f"# biopb docs\n\n## Procedures\n{lines}\n"))
    assert f"{INDEX_MAX_ENTRIES} entries of at most {INDEX_MAX_ENTRIES}" in ok.text
    before = snapshot(store.local_dir)
    with pytest.raises(
        WriteRefused, match=f"would have {INDEX_MAX_ENTRIES + 1} entries; the cap is {INDEX_MAX_ENTRIES}"
    ):
        store.write_doc("index", old="- doc0: hook 0", new="- doc0: hook 0\n- one-more: x")
    with pytest.raises(WriteRefused, match=f"the cap is {INDEX_MAX_ENTRIES}"):
        store.write_doc("brand-new", body="# New\n\nwould need an entry\n")
    assert snapshot(store.local_dir) == before
    # Editing a hook at the cap, and shrinking, stay allowed.
    assert store.write_doc("index", old="hook 0\n", new="hook zero\n").changed
    assert store.write_doc("index", old="- doc1: hook 1\n", new="").changed


def test_body_over_the_line_cap_is_refused_and_at_the_cap_accepted(store: DocStore) -> None:
    render_index(store)
    before = snapshot(store.local_dir)
    over = "".join(f"line {i}\n" for i in range(BODY_MAX_LINES + 1))
    with pytest.raises(
        WriteRefused, match=f"would be {BODY_MAX_LINES + 1} lines; a doc may have at most {BODY_MAX_LINES}"
    ):
        store.write_doc("long", body=over)
    assert snapshot(store.local_dir) == before
    assert store.write_doc("long", body="".join(f"line {i}\n" for i in range(BODY_MAX_LINES))).created
    with pytest.raises(WriteRefused, match="at most"):
        store.write_doc("long", old="line 0\n", new="line 0\nline extra\n")


def test_hand_dropped_local_file_is_readable_but_not_surfaced(store: DocStore) -> None:
    render_index(store)
    (store.local_dir / "dropped.md").write_text("# Dropped\n\nBy hand.\n")
    assert "By hand." in read_doc(store, "dropped")
    rendered = render_index(store)
    assert "dropped" not in rendered
    assert "dropped" not in store.listed_ids()
    assert "dropped" in store.shelf.doc_ids()


def test_ignored_and_banked_shipped_docs_stay_out_of_the_tail_but_read(store: DocStore) -> None:
    rendered = render_index(store)
    tail = rendered[rendered.index(NEW_TAIL_HEADING) :]
    assert "- extra/new-thing: A doc the index does not list yet" in tail
    assert "smlm" not in tail and "_banked" not in tail
    assert "Resolution of localisation data." in read_doc(store, "smlm")
    assert "Thin evidence." in read_doc(store, "_banked")
    assert store.shelf.shipped_ids() == ["authoring", "extra/new-thing", "flatfield", "kernel", "smlm", "stitch-tiles"]
    assert "_banked" in store.shelf.doc_ids()
    assert store.listed_ids() == ["kernel", "authoring", "flatfield", "stitch-tiles", "extra/new-thing"]


def test_filing_a_new_shipped_doc_clears_it_from_the_tail(store: DocStore) -> None:
    render_index(store)
    store.write_doc("index", old="ignored: smlm", new="ignored: smlm, extra/new-thing")
    assert NEW_TAIL_HEADING not in render_index(store)


def test_shipped_doc_removed_in_a_new_release_renders_missing(tmp_path: Path, shipped: Path) -> None:
    render_index(DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0"))
    (shipped / "stitch-tiles.md").unlink()
    store = DocStore(tmp_path / "local", shipped_dir=shipped, version="1.1")
    assert "- stitch-tiles: assemble a grid of tiles (missing)" in render_index(store)
    assert "stitch-tiles" not in store.listed_ids()
    assert any(p.kind is Lint.INDEX_MISSING and p.facts["doc_id"] == "stitch-tiles" for p in store.check())


def test_version_bump_flags_only_changed_shadowed_docs_until_the_next_bump(tmp_path: Path, shipped: Path) -> None:
    local = tmp_path / "local"
    v1 = DocStore(local, shipped_dir=shipped, version="1.0")
    v1.write_doc("flatfield", old="1. estimate", new="1. estimate the flat")
    assert STALE_TAIL_HEADING not in render_index(v1)  # first run: nothing changed
    (shipped / "flatfield.md").write_text(SHIPPED["flatfield"] + "3. check\n")  # shadowed
    (shipped / "kernel.md").write_text(SHIPPED["kernel"] + "Now with jobs.\n")  # unshadowed
    same_version = DocStore(local, shipped_dir=shipped, version="1.0")
    assert STALE_TAIL_HEADING not in render_index(same_version)  # no bump, no re-hash
    v2 = DocStore(local, shipped_dir=shipped, version="2.0")
    rendered = render_index(v2)
    tail = rendered[rendered.index(STALE_TAIL_HEADING) :]
    assert '- flatfield: Correct uneven illumination. — read_doc("flatfield@diff")' in tail
    assert "kernel" not in tail
    assert "Now with jobs." in read_doc(v2, "kernel")
    assert "+3. check" not in read_doc(v2, "flatfield@diff") and "-3. check" in read_doc(v2, "flatfield@diff")
    v3 = DocStore(local, shipped_dir=shipped, version="3.0")
    assert STALE_TAIL_HEADING not in render_index(v3)


def test_hand_edited_files_never_crash_render_or_read(store: DocStore) -> None:
    render_index(store)
    local = store.local_dir
    (local / "garbage.md").write_text("---\n: [\n{{{ nope\ndescription: [x\n---\n# Garbage\n\nStill readable.\n")
    (local / "crlf.md").write_bytes(b"# Windows\r\n\r\nSaved in Notepad.\r\n")
    (local / "bom.md").write_bytes(b"\xef\xbb\xbf# Bom\n\nWith a BOM.\n")
    (local / "latin1.md").write_bytes(b"# Caf\xe9\n")
    (local / "binary.md").write_bytes(b"\x00\x01\x02")
    (local / "dir.md").mkdir()
    (local / "big.md").write_bytes(b"a" * (FILE_MAX_BYTES + 1))
    entries = "".join(f"- {i}: hand edited {i}\n" for i in ("garbage", "crlf", "bom", "latin1", "binary", "dir", "big"))
    store.write_doc("index", old="ignored: smlm", new=f"ignored: smlm\n\n## Mine\n{entries}")
    rendered = render_index(store)
    assert "- latin1: hand edited latin1\n" in rendered
    assert "Still readable." in read_doc(store, "garbage")
    assert read_doc(store, "crlf").endswith("# Windows\n\nSaved in Notepad.\n")
    assert read_doc(store, "bom").endswith("\n\n# Bom\n\nWith a BOM.\n")
    for doc_id, says, why in (
        ("latin1", "not UTF-8", Unreadable.NOT_UTF8),
        ("binary", "NUL bytes", Unreadable.BINARY),
        ("dir", "is a directory", Unreadable.DIRECTORY),
        ("big", "over the", Unreadable.TOO_BIG),
    ):
        with pytest.raises(DocUnreadable) as exc_info:
            read_doc(store, doc_id)
        assert str(local / f"{doc_id}.md") in str(exc_info.value) and says in str(exc_info.value)
        assert exc_info.value.why is why
        with pytest.raises(DocUnreadable):
            store.write_doc(doc_id, body="# Replace\n")
    unreadable = {p.facts["doc_id"] for p in store.check() if p.kind is Lint.UNREADABLE}
    assert {"latin1", "binary"} <= unreadable
    assert store.write_doc("crlf", old="Notepad", new="an editor").changed


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_permission_is_a_clear_error(store: DocStore) -> None:
    render_index(store)
    path = store.local_dir / "locked.md"
    path.write_text("# Locked\n")
    path.chmod(0)
    with pytest.raises(DocUnreadable, match="permission denied") as exc_info:
        read_doc(store, "locked")
    assert exc_info.value.why is Unreadable.PERMISSION


def test_unreadable_local_index_renders_the_shipped_one_with_a_note(store: DocStore) -> None:
    render_index(store)
    (store.local_dir / "index.md").write_bytes(b"# Caf\xe9\n")
    rendered = render_index(store)
    assert "could not be read" in rendered and "- kernel: namespace" in rendered
    with pytest.raises(DocUnreadable):
        store.write_doc("index", old="a", new="b")
    assert store.write_doc("index", body=SHIPPED_INDEX).changed
    assert "could not be read" not in render_index(store)


def test_description_cache_follows_the_file(store: DocStore) -> None:
    assert "- extra/new-thing: A doc the index does not list yet" in render_index(store)
    path = store.shipped_dir / "extra" / "new-thing.md"
    path.write_text("---\ndescription: A different hook, longer than before\n---\n# New\n")
    assert "- extra/new-thing: A different hook, longer than before" in render_index(store)


def test_info_summary_and_local_state(store: DocStore) -> None:
    store.write_doc("proc", body="---\npackages: [numpy~=2.0]\n---\n# Proc title\n\nDoes things.\n")
    info = store.info("proc")
    assert (info.title, info.description, info.origin, info.packages) == (
        "Proc title",
        "Does things.",
        Origin.LOCAL,
        ["numpy~=2.0"],
    )
    assert store.info("_banked").origin == Origin.SHIPPED
    summary = store.summary()
    assert (
        summary["local_docs"] == 1
        and summary["index_entries"] == 6
        and summary["index_max_entries"] == INDEX_MAX_ENTRIES
    )
    state = store.shelf.local_state()
    assert set(state) == {"index", "proc"}


WRITER = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from biopb_mcp.docs.store import DocStore
    local, shipped, prefix, n = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    store = DocStore(local, shipped_dir=shipped, version="1.0")
    Path(sys.argv[5]).touch()
    while not Path(sys.argv[6]).exists():
        time.sleep(0.002)
    for i in range(n):
        store.write_doc(f"{prefix}-{i}", body=f"# {prefix} {i}\\n\\nDoc {i} from {prefix}.\\n")
        store.write_doc("shared", old=f"{prefix}: {i}.", new=f"{prefix}: {i + 1}.")
    """
)


def test_two_processes_creating_docs_concurrently_lose_no_index_entry(tmp_path: Path, store: DocStore) -> None:
    n = 12
    store.write_doc("shared", body="# Shared\n\ncounters\n\np: 0.\n\nq: 0.\n")
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(store.local_dir),
                str(store.shipped_dir),
                prefix,
                str(n),
                str(tmp_path / f"ready-{prefix}"),
                str(go),
            ],
            stderr=subprocess.PIPE,
        )
        for prefix in ("p", "q")
    ]
    try:
        deadline = time.monotonic() + 60  # a bound, not a timing assertion
        while not all((tmp_path / f"ready-{p}").exists() for p in ("p", "q")):
            assert all(proc.poll() is None for proc in procs), "a writer died before starting"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err.decode()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    entries = parse((store.local_dir / "index.md").read_text()).entry_ids
    expected = {f"{p}-{i}" for p in ("p", "q") for i in range(n)}
    assert expected <= entries
    assert read_doc(store, "shared").endswith(f"p: {n}.\n\nq: {n}.\n")


def test_threads_creating_docs_at_once_all_land_in_the_index(store: DocStore) -> None:
    import threading

    render_index(store)
    errors: list[BaseException] = []

    def create(k: int) -> None:
        try:
            for i in range(5):
                store.write_doc(f"t{k}/d{i}", body=f"# T{k} {i}\n\nThread doc.\n")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    entries = parse((store.local_dir / "index.md").read_text()).entry_ids
    assert {f"t{k}/d{i}" for k in range(4) for i in range(5)} <= entries
    assert stat.S_IMODE((store.local_dir / "t0").stat().st_mode) & 0o077 == 0


def test_index_diff_compares_the_local_index_with_the_shipped_one(store: DocStore) -> None:
    store.write_doc("index", old="ignored: smlm", new="ignored: smlm, stitch-tiles")
    out = read_doc(store, "index@diff")
    assert out.startswith("index@diff") and "-ignored: smlm\n+ignored: smlm, stitch-tiles" in out
    assert "has no local copy" in read_doc(store, "kernel@diff")
    store.write_doc("solo", body="# Solo\n\nLocal only.\n")
    assert "nothing to diff against" in read_doc(store, "solo@diff")


def test_render_with_hidden_ignored_ids(store: DocStore) -> None:
    assert "smlm" not in render_index(store, hide_ignored=True)
    assert "ignored: smlm" in render_index(store)


def test_an_index_entry_naming_index_is_not_a_doc(store: DocStore) -> None:
    store.write_doc(
        "index", old="- authoring: how to write a doc", new="- authoring: how to write a doc\n- index: this file"
    )
    assert "- index: this file (missing)" in render_index(store)
    assert "index" not in store.listed_ids()
    assert any(p.kind is Lint.INDEX_SELF for p in store.check())
    with pytest.raises(InvalidDocId):
        store.info("index")


def test_line_cap_counts_newlines_only(store: DocStore) -> None:
    """A form feed or U+2028 inside a line is not a line break in a markdown file (str.splitlines says it is)."""
    body = "".join(f"line {i}\n" for i in range(BODY_MAX_LINES - 2)) + "page\x0cbreak\nsep\u2028inside\n"
    assert store.write_doc("odd-breaks", body=body).created
    assert not any(p.facts.get("doc_id") == "odd-breaks" for p in store.check())


def test_check_reports_entry_lines_whose_id_is_outside_the_grammar(store: DocStore) -> None:
    """The loader reads such a line as prose (no `(missing)` flag), so only check can point at it."""
    bad = ["a//b", ".hidden", "x" * 201]
    store.write_doc("index", old="ignored: smlm", new="".join(f"- {b}: hook\n" for b in bad) + "ignored: smlm")
    problems = store.check()
    for b in bad:
        assert any(p.kind is Lint.INDEX_BAD_ID and p.facts["token"] == b for p in problems), (b, problems)
    assert render_index(store).count("(missing)") == 0


def test_an_old_that_overlaps_itself_counts_as_two_matches(store: DocStore) -> None:
    store.write_doc("notes", body="# Notes\n\nbaaa\n")
    before = read_doc(store, "notes")
    with pytest.raises(WriteRefused, match="matches 2 times"):
        store.write_doc("notes", old="aa", new="b")
    assert read_doc(store, "notes") == before


def test_writing_the_rendered_index_back_does_not_pile_up_its_marks(store: DocStore) -> None:
    store.write_doc("kernel", old="One kernel per server.", new="One kernel per server, shared.")
    store.write_doc("index", old="- stitch-tiles: assemble a grid of tiles", new="- gone-doc: was here")
    rendered = render_index(store)
    assert "- kernel: namespace, jobs, where computes run (local copy)" in rendered
    assert "- gone-doc: was here (missing)" in rendered
    head = rendered.split(NEW_TAIL_HEADING)[0]  # the agent's file as rendered, without the tail
    store.write_doc("index", body=head)
    stored = (store.local_dir / "index.md").read_text()
    assert "(local copy)" not in stored and "(missing)" not in stored
    assert render_index(store).count("(local copy)") == 1


def test_check_ignores_links_quoted_as_code_in_shipped_docs(tmp_path: Path) -> None:
    docs = dict(
        SHIPPED,
        authoring="# Authoring\n\nLink with `[[other-doc]]`; e.g.\n\n```\nsee [[nowhere]]\n```\n\nSee [[kernel]].\n",
    )
    store = DocStore(tmp_path / "local", shipped_dir=make_shipped(tmp_path / "shipped", docs))
    assert not [p for p in store.check() if p.kind is Lint.SHIPPED_LINK]
    docs["authoring"] += "\nAnd [[really-missing]].\n"
    store = DocStore(tmp_path / "local2", shipped_dir=make_shipped(tmp_path / "shipped2", docs))
    assert [p for p in store.check() if p.kind is Lint.SHIPPED_LINK] == [
        Finding(Lint.SHIPPED_LINK, {"doc_id": "authoring", "target": "really-missing"})
    ]


def test_a_same_size_edit_within_the_same_timestamp_is_still_seen(
    store: DocStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stamps, "RACY_NS", 3600 * 10**9)  # the doc stays recent however slow the machine
    path = store.local_dir / "lab" / "note.md"
    store.write_doc("lab/note", body="---\ndescription: first take\n---\n# Note\n")
    assert store.info("lab/note").description == "first take"
    stamp = path.stat().st_mtime_ns
    path.write_text("---\ndescription: other take\n---\n# Note\n")  # same size
    os.utime(path, ns=(stamp, stamp))  # and the same mtime, as a coarse clock would give
    assert store.info("lab/note").description == "other take"


def test_the_size_cap_holds_for_the_text_written_not_the_argument(store: DocStore) -> None:
    """A body of exactly the cap gains a newline, and old/new can grow a doc: the cap is checked
    on the text that would be written, so no write leaves a doc too big to read again."""
    render_index(store)
    before = snapshot(store.local_dir)
    with pytest.raises(WriteRefused, match=f"would be {FILE_MAX_BYTES + 1:,} bytes; a doc file may have at most"):
        store.write_doc("huge", body="a" * FILE_MAX_BYTES)  # no trailing newline: one more byte on disk
    assert snapshot(store.local_dir) == before
    half = "b" * (FILE_MAX_BYTES // 2) + "\n"
    store.write_doc("grown", body="# Grown\n\nMARK\n" + half)
    with pytest.raises(WriteRefused, match="bytes; a doc file may have at most"):
        store.write_doc("grown", old="MARK", new=half + half)
    assert store.doc_text("grown")[0] == "# Grown\n\nMARK\n" + half  # unchanged, still readable
    assert store.write_doc("fits", body="c" * (FILE_MAX_BYTES - 1)).created  # + newline: exactly the cap
    assert len(store.doc_text("fits")[0].encode()) == FILE_MAX_BYTES


def test_the_index_is_capped_in_bytes_and_lines_and_a_shrinking_write_stays_allowed(store: DocStore) -> None:
    from biopb_mcp.docs import INDEX_MAX_BYTES, INDEX_MAX_LINES

    render_index(store)
    before = snapshot(store.local_dir)
    prose = "".join(f"note {i}\n" for i in range(INDEX_MAX_LINES))
    with pytest.raises(WriteRefused, match=f"would be {INDEX_MAX_LINES + 2:,} lines; the index may have at most"):
        store.write_doc("index", body="# docs\n\n" + prose)
    with pytest.raises(WriteRefused, match="bytes; the index may have at most"):
        store.write_doc("index", body="# docs\n\n" + "x" * INDEX_MAX_BYTES + "\n")
    with pytest.raises(WriteRefused, match="lines; the index may have at most"):
        store.write_doc("index", old="ignored: smlm", new="ignored: smlm\n" + prose)
    assert snapshot(store.local_dir) == before
    # An index made too long by hand can still be shortened by a write.
    (store.local_dir / "index.md").write_text(SHIPPED_INDEX + prose)
    assert store.write_doc("index", old="note 0\n", new="").changed


def test_a_write_computes_its_diffs_after_releasing_the_tier_lock(
    store: DocStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big diff must not hold every other writer out: the lock is free while it is computed."""
    import fcntl

    from biopb_mcp.docs import textdiff, writes
    from biopb_mcp.fs import atomic

    render_index(store)
    held: list[bool] = []
    real = textdiff.unified_diff

    def probing(*args: str) -> str:
        fd = os.open(store.local_dir / atomic.LOCK_NAME, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return real(*args)

    monkeypatch.setattr(writes, "unified_diff", probing)
    result = store.write_doc("fresh", body="# Fresh\n\nA procedure.\n")
    assert "+A procedure." in result.diff and result.index_diff is not None and "fresh" in result.index_diff
    assert "+Changed." in store.write_doc("fresh", body="# Fresh\n\nChanged.\n").diff
    assert "+- kernel : namespace" in store.write_doc("index", old="- kernel:", new="- kernel :").diff
    assert held and not any(held), held
