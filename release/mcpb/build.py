"""Build the Claude Desktop bundle: ``python release/mcpb/build.py [--out FILE]``.

A bundle (``.mcpb``) is a zip whose root holds ``manifest.json``. This one carries no code: its
manifest runs the ``biopb-mcp`` command of an environment the user installed biopb-mcp into, so
the bundle stays a few hundred bytes, works for every platform the package does, and never
ships a second, older copy of the package beside the one the user upgrades. It is built with the
standard library, so building needs no Node; ``mcpb validate`` (the official tool) checks the
manifest in the test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MANIFEST = HERE / "manifest.json"
DEFAULT_OUT = REPO / "dist" / "biopb-mcp.mcpb"
FIXED_TIME = (2020, 1, 1, 0, 0, 0)
"""Every build of one manifest is the same bytes (a zip entry stores a time)."""


def package_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def build(out: Path) -> Path:
    """Write the bundle to `out`; refuses a manifest whose version is not the package's."""
    text = MANIFEST.read_text(encoding="utf-8")
    version = json.loads(text)["version"]
    if version != package_version():
        raise SystemExit(
            f"error: {MANIFEST.relative_to(REPO)} says version {version}, pyproject.toml {package_version()}: "
            "make them agree"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        entry = zipfile.ZipInfo("manifest.json", date_time=FIXED_TIME)
        entry.external_attr = 0o644 << 16
        bundle.writestr(entry, text, compress_type=zipfile.ZIP_DEFLATED)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the Claude Desktop bundle (.mcpb) of biopb-mcp.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write it (default: {DEFAULT_OUT})")
    path = build(parser.parse_args(argv).out)
    print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
