"""Isolated config trees for bench runs and the tests of withheld docs: the ablation index and the
lab tier.

A bench run must never see, or write to, the user's real config, state or docs. Every run gets a
directory used as ``BIOPB_CONFIG_DIR`` with its own ``config.toml`` (state, runtime and log paths
inside it) and its own local docs tier (the bench points the agent's environment there too).

The ablation makes the procedures unreachable, not just unlisted: every entry under the
``## Procedures`` heading leaves the index, and the tree's config withholds those ids
(``docs.withhold``), so the server answers as if they were not shipped: no listing, tail,
search hit, resource, suggestion or link names one, and a read of one is a read of an unknown id.
Reference entries stay. That heading is the only one named from outside the index.

The docs arm also gets the lab tier: the docs in ``bench/lab/`` copied into the local tier under
``lab/`` and listed under a ``## Lab`` heading, as a lab would file its own conventions. The
no-docs arm has none of them. The procedures-off arm (``lab=True`` with ``bench_docs=False``)
withholds the procedures exactly as the no-docs arm does but keeps the lab tier, so what it lacks
against the docs arm is the procedures alone.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from biopb_mcp.docs.index import parse as parse_index

__all__ = [
    "LAB_DIR",
    "LAB_SECTION",
    "PROCEDURES_HEADING",
    "Ablation",
    "ConfigTree",
    "ablate_index",
    "prepare_tree",
    "shipped_index_path",
    "with_lab_section",
]

PROCEDURES_HEADING = "## Procedures"
"""The one index heading the bench names; the seed gate test pins it."""

_HEADING = re.compile(r"^(#{1,6})\s")

LAB_DIR = Path(__file__).resolve().parents[2] / "bench" / "lab"
"""The lab tier's docs, installed as ``lab/<name>`` in the docs arm."""

LAB_SECTION = """
## Lab
Our own conventions: read the matching one before analysing our files.
- lab/microscope: our scope (the widefield): pixel size, camera offset, channel order, nucleus sizes, time-lapse interval (the files do not record them)
- lab/spinning-disk: our spinning disk: pixel size, camera offset, its own channel order
- lab/plate-imager: our plate imager: which well each image file belongs to
- lab/flatfield: correct uneven illumination on our scope the way we do
- lab/positive-cells: how many cells are positive (GFP-positive)
- lab/dead-cells: how many cells are dead (from DAPI)
- lab/debris-gate: count cells or nuclei without the debris
- lab/counting: nuclei per mm², and which nuclei at the image edge count
- lab/units: the units we report intensities, lengths and speeds in
- lab/results-layout: where to save results tables and label images
"""
"""The docs arm's index section for the lab tier, in the lab's words."""


@dataclass(frozen=True)
class Ablation:
    """The ablated index text, the ids it withholds, and which entries stayed listed."""

    text: str
    withheld: list[str]
    kept: list[str]


def shipped_index_path() -> Path:
    """Where the shipped seed index lives (found without importing the store)."""
    import biopb_mcp

    return Path(biopb_mcp.__file__).parent / "_docs_data" / "index.md"


def ablate_index(text: str) -> Ablation:
    """Drop every entry under ``## Procedures``; keep everything else.

    The section runs from the heading to the next heading of the same or a higher level; deeper
    sub-headings inside it still belong to it. The dropped ids also leave an ``ignored:`` line
    that named them (the rendered index would spell them out); prose and headings stay.

    Raises:
        ValueError: the index has no ``## Procedures`` heading, so there is nothing to ablate
            and the arm would silently equal the docs arm.
    """
    index = parse_index(text.replace("\r\n", "\n"))
    section = _procedures_section(index.lines)
    if section is None:
        raise ValueError(f"index has no {PROCEDURES_HEADING!r} heading; cannot build the no-docs arm")
    # Collection lines (`- x/: …`) are folders, not docs: they stay where they are.
    dropping = [e for e in index.entries if e.line in section and not e.collection]
    withheld = [e.doc_id for e in dropping]
    kept = [e.doc_id for e in index.entries if e not in dropping]
    dropped = {e.line for e in dropping}
    ignored_line: str | None = ("ignored: " + ", ".join(i for i in index.ignored if i not in withheld)).rstrip()
    out: list[str] = []
    for i, line in enumerate(index.lines):
        if i in dropped:
            continue
        if i in index.ignored_lines:
            if ignored_line is None:
                continue  # the first ignored: line carries them all; later ones go
            line, ignored_line = ignored_line, None
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return Ablation(text="\n".join(out) + "\n", withheld=withheld, kept=kept)


def _procedures_section(lines: list[str]) -> range | None:
    """Line numbers under ``## Procedures``, up to the next heading of level 2 or higher."""
    start = next((i for i, line in enumerate(lines) if line.strip() == PROCEDURES_HEADING), None)
    if start is None:
        return None
    for end in range(start + 1, len(lines)):
        heading = _HEADING.match(lines[end])
        if heading and len(heading.group(1)) <= 2:
            return range(start, end)
    return range(start, len(lines))


@dataclass(frozen=True)
class ConfigTree:
    """A prepared, isolated config tree; ``root`` is the run's ``BIOPB_CONFIG_DIR``."""

    root: Path
    bench_docs: bool
    withheld: list[str]
    """The procedures the server withholds (the docs-off arm), else empty."""
    lab: bool = False
    """Whether the tree holds the lab tier."""

    @property
    def docs_dir(self) -> Path:
        return self.root / "docs"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def runtime_dir(self) -> Path:
        return self.root / "run"


def with_lab_section(index_text: str) -> str:
    """The index with the Lab section inserted before its ``ignored:`` line (or at the end)."""
    lines = index_text.rstrip("\n").split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith("ignored:")), len(lines))
    return "\n".join(lines[:at]).rstrip("\n") + "\n" + LAB_SECTION + "\n" + "\n".join(lines[at:]) + "\n"


def prepare_tree(
    out: Path,
    *,
    bench_docs: bool,
    lab: bool | None = None,
    index_text: str | None = None,
    extra_config: dict[str, dict[str, object]] | None = None,
    kernel_plugins: dict[str, str] | None = None,
) -> ConfigTree:
    """Write a fresh config tree at ``out`` (created; must be empty or absent).

    Args:
        out: the directory to use as ``BIOPB_CONFIG_DIR``.
        bench_docs: True keeps the seed index and adds the lab tier; False writes the ablated
            index, withholds the procedures (``docs.withhold``) and adds no lab tier.
        lab: whether to add the lab tier (default: as ``bench_docs``); True with
            ``bench_docs=False`` is the procedures-off arm.
        index_text: the seed index to start from (default: the shipped one).
        extra_config: more config.toml tables (e.g. ``{"kernel": {"promote_after": 1.0}}``).
        kernel_plugins: kernel plugin files (name -> source) for ``<tree>/kernel/``, as a lab
            keeps its own helpers there.

    Raises:
        FileExistsError: ``out`` exists and is not empty (a run never reuses a tree).
        ValueError: the index cannot be ablated.
    """
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; a bench config tree must be fresh")
    seed = index_text if index_text is not None else shipped_index_path().read_text(encoding="utf-8")
    withheld: list[str] = []
    if not bench_docs:
        ablation = ablate_index(seed)
        seed, withheld = ablation.text, ablation.withheld
    lab = bench_docs if lab is None else lab
    tree = ConfigTree(root=out.resolve(), bench_docs=bench_docs, withheld=withheld, lab=lab)
    tree.docs_dir.mkdir(parents=True)
    tree.state_dir.mkdir()
    tree.runtime_dir.mkdir(mode=0o700)
    if lab:
        seed = with_lab_section(seed)
        (tree.docs_dir / "lab").mkdir()
        for doc in sorted(LAB_DIR.glob("*.md")):
            shutil.copyfile(doc, tree.docs_dir / "lab" / doc.name)
    (tree.docs_dir / "index.md").write_text(seed, encoding="utf-8")
    config: dict[str, dict[str, object]] = {
        "server": {
            "state_dir": str(tree.state_dir),
            "runtime_dir": str(tree.runtime_dir),
            "log_file": str(tree.state_dir / "server.log"),
        },
    }
    if withheld:
        config["docs"] = {"withhold": withheld}
    for table, values in (extra_config or {}).items():
        config.setdefault(table, {}).update(values)
    (tree.root / "config.toml").write_text(tomli_w.dumps(config), encoding="utf-8")
    if kernel_plugins:
        (tree.root / "kernel").mkdir()
        for name, source in kernel_plugins.items():
            (tree.root / "kernel" / name).write_text(source, encoding="utf-8")
    (tree.root / "bench.json").write_text(
        json.dumps({"bench_docs": bench_docs, "lab": lab, "withheld": withheld}, indent=2) + "\n", encoding="utf-8"
    )
    return tree
