"""Where this copy of biopb-mcp was installed from, as a pip requirement another environment can use.

Until this project is published, the name biopb-mcp on PyPI belongs to its earlier design (a napari
plugin, releases 0.5.1-0.7.2, without our extras): a bare ``pip install 'biopb-mcp[console]'``
installs that package and warns that the extra does not exist. So every install line names the
place this copy came from: its checkout (a source tree beside the package, as an editable install
or a run from the tree has), else what pip recorded at install time (``direct_url.json``: a
directory, a wheel file, a git URL), else the name with this version as a floor, which never
resolves to the earlier releases.
"""

from __future__ import annotations

import json
import tomllib
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["DIST_NAME", "checkout_root", "requirement"]

DIST_NAME = "biopb-mcp"

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The ``biopb_mcp`` package this module belongs to."""


def checkout_root(package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The source tree ``package_dir`` lives in (its parent holds this project's pyproject.toml), or None."""
    pyproject = package_dir.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return package_dir.parent if project.get("name") == DIST_NAME else None


def requirement(extras: str, package_dir: Path = PACKAGE_DIR) -> str:
    """A pip requirement for this package with ``extras`` (comma-separated) that resolves to this
    project wherever this copy came from (see the module docstring)."""
    root = checkout_root(package_dir)
    if root is not None:
        return f"{root}[{extras}]"
    try:
        dist = metadata.distribution(DIST_NAME)
    except metadata.PackageNotFoundError:
        return f"{DIST_NAME}[{extras}]"
    recorded = _recorded_source(dist.read_text("direct_url.json"))
    if recorded is not None:
        kind, where = recorded
        return f"{where}[{extras}]" if kind == "dir" else f"{DIST_NAME}[{extras}] @ {where}"
    return f"{DIST_NAME}[{extras}]>={dist.version}"


def _recorded_source(text: str | None) -> tuple[str, str] | None:
    """("dir", path) or ("url", pip URL) from pip's ``direct_url.json``, where still usable."""
    try:
        record = json.loads(text or "")
    except ValueError:
        return None
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str):
        return None
    vcs = record.get("vcs_info")
    parsed = urlparse(url)
    if isinstance(vcs, dict) and vcs.get("vcs"):
        if parsed.scheme == "file" and not parsed.netloc:  # PEP 508 parsers refuse git+file:///
            url = f"file://localhost{parsed.path}"
        commit = vcs.get("commit_id")
        return "url", f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
    if parsed.scheme != "file":
        return "url", url
    path = Path(unquote(parsed.path))
    if not path.exists():  # a wheel or tree since removed: the name and version are all that is left
        return None
    return ("dir", str(path)) if "dir_info" in record else ("url", url)
