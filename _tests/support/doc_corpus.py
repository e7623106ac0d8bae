"""A local docs tier whose hand-written index lists many docs: the resources tests' corpus."""

from __future__ import annotations

from pathlib import Path


def make_corpus(root: Path, n: int) -> tuple[Path, Path, list[str]]:
    """(local dir, shipped dir, sorted ids): ``n`` listed docs with nested ids over an empty shipped tier."""
    shipped, local = root / "shipped", root / "local"
    shipped.mkdir(parents=True)
    (shipped / "index.md").write_text("# Docs index\n", encoding="utf-8")
    ids = [f"grp{i % 7}/doc-{i:04d}" for i in range(n)]
    lines = ["# Docs index", ""]
    for i, doc_id in enumerate(ids):
        path = local / f"{doc_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Title {i}\n\nWhat doc {i} is for.\n\n## Steps\n1. one\n", encoding="utf-8")
        lines.append(f"- {doc_id}: when the user asks for thing {i}")
    (local / "index.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return local, shipped, sorted(ids)
