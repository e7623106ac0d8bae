"""Fixtures for ``python -m bench perf``: isolated config trees filled with synthetic docs.

Every tree lives under one temp root: its own ``BIOPB_CONFIG_DIR`` (docs in ``<tree>/docs``), XDG,
Jupyter and IPython dirs, so neither the harness nor the servers it spawns touch the user's files.
The text is generated from a seeded RNG, so two runs measure the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from biopb_mcp.config.isolated import IsolatedDirs
from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs.store import SHIPPED_DIR, DocStore

__all__ = ["Tree", "child_env", "make_tree", "tree_dirs", "vocabulary"]

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "si", "po", "ve", "di", "gan", "tor", "mel", "bis", "qua", "zen"]
LITERALS = ["ValueError", "threshold_otsu", "kernel.promote_after", "MemoryError", "peak_local_max", "tifffile.imread"]
"""Literals planted in a few docs, so a query can look for an exact phrase the way an agent does."""


def vocabulary(rng: random.Random, n: int = 4000) -> list[str]:
    """Pseudo-words, deterministic for a seed: a corpus with a realistic spread of term frequencies."""
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


@dataclass
class Tree:
    """One isolated config tree and what was put in it."""

    root: Path
    docs: Path
    ids: list[str] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)
    bytes: int = 0

    @property
    def config_dir(self) -> Path:
        return self.root


def tree_dirs(tree: Tree) -> IsolatedDirs:
    """Where a process that must see only this tree keeps things (its platform dirs in ``xdg/``)."""
    return IsolatedDirs.in_tree(tree.root, homes=tree.root / "xdg", runtime_dir=tree.root / "xdg" / "run")


def child_env(tree: Tree) -> dict[str, str]:
    """Environment for a process that must see only this tree (server children, kernels)."""
    return tree_dirs(tree).variables()


def _paragraph(rng: random.Random, vocab: list[str], words: int) -> str:
    # Zipf-ish: low indices are common words, the long tail is rare.
    picks = [vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(words)]
    return " ".join(picks).capitalize() + "."


def _doc(rng: random.Random, vocab: list[str], doc_id: str, target_bytes: int) -> tuple[str, str]:
    hook = " ".join(rng.choice(vocab) for _ in range(6))
    parts = ["---", f"description: {hook}", "---", f"# {doc_id.rsplit('/', 1)[-1]} {rng.choice(vocab)}", ""]
    size = sum(len(p) + 1 for p in parts)
    step = 0
    while size < target_bytes:
        step += 1
        chunk = [f"## Step {step}: {rng.choice(vocab)} {rng.choice(vocab)}", "", _paragraph(rng, vocab, 45), ""]
        if rng.random() < 0.05:
            chunk += [
                "```python",
                f"result = {rng.choice(LITERALS)}(image)  # raises {rng.choice(LITERALS)}",
                "```",
                "",
            ]
        parts += chunk
        size += sum(len(p) + 1 for p in chunk)
    return "\n".join(parts) + "\n", hook


def make_tree(
    root: Path,
    *,
    n_files: int,
    doc_bytes: int,
    index_entries: int,
    seed: int = 7,
    config_toml: str = "",
) -> Tree:
    """Write a config tree: `n_files` local docs of about `doc_bytes`, an index of `index_entries` entries.

    The index is the shipped one plus a `## Lab` section listing local docs until the entry count is
    reached (an entry count over the write cap is only possible this way: by hand, as a user might).
    """
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    docs = root / "docs"
    tree = Tree(root=root, docs=docs)
    docs.mkdir(parents=True, exist_ok=True)
    runtime = tree_dirs(tree).runtime_dir
    runtime.mkdir(parents=True, exist_ok=True, mode=0o700)  # runtime dirs must be 0700
    runtime.chmod(0o700)
    if config_toml:
        (root / "config.toml").write_text(config_toml, encoding="utf-8")
    hooks: dict[str, str] = {}
    per_dir = 100
    for i in range(n_files):
        doc_id = f"lab/g{i // per_dir:03d}/d{i:05d}"
        text, hook = _doc(rng, vocab, doc_id, doc_bytes)
        path = docs / f"{doc_id}.md"
        if i % per_dir == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        tree.ids.append(doc_id)
        tree.bytes += len(text.encode("utf-8"))
        hooks[doc_id] = hook
    shipped_index = (SHIPPED_DIR / "index.md").read_text(encoding="utf-8")
    have = index_mod.parse(shipped_index).entry_count
    # The folder line surfaces every generated doc to search (which covers only what the index
    # surfaces); the entries below are what the index lists one by one.
    lines = [shipped_index.rstrip("\n"), "", "## Lab", "", "- lab/: the lab's generated docs"]
    for doc_id in tree.ids[: max(0, index_entries - have - 1)]:
        lines.append(f"- {doc_id}: {hooks[doc_id]}")
        tree.indexed.append(doc_id)
    (docs / "index.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    # An existing install: the store's first-run setup (manifest) is done here, not in a figure.
    DocStore(docs).summary()
    return tree
