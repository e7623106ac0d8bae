"""The change manifest: which shipped docs changed at the last version bump, so the index can say which local copies may be behind.

`.shipped-manifest.json` in the local tier holds the installed package version and a sha256 per
shipped id. While the version is unchanged nothing is hashed: a session that never upgrades pays
one small read. On a version change the new hashes are diffed against the stored ones and the
changed ids are stored until the next bump, which is how the stale tail clears itself. A first
run has nothing to diff against and reports nothing changed. The manifest is not `.md` and its
name starts with `.`, so it is never an id.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from biopb_mcp.fs import nofollow
from biopb_mcp.fs.atomic import write_atomic

logger = logging.getLogger(__name__)

MANIFEST_NAME = ".shipped-manifest.json"
_MAX_BYTES = 50_000_000
"""Far above any real manifest (a hash per shipped doc); a bound for a file swapped for junk."""


@dataclass(frozen=True)
class Manifest:
    """The stored manifest: version, per-id hashes, and the ids changed at the last bump."""

    version: str
    hashes: dict[str, str]
    changed: frozenset[str]
    previous_version: str | None = None


def hash_files(files: Mapping[str, str | Path]) -> dict[str, str]:
    """sha256 of each shipped file's bytes; an unreadable file is left out with a warning."""
    hashes: dict[str, str] = {}
    for doc_id, path in files.items():
        try:
            with open(path, "rb") as fh:
                hashes[doc_id] = hashlib.sha256(fh.read()).hexdigest()
        except OSError as exc:
            logger.warning("Cannot hash shipped doc %s: %s", path, exc)
    return hashes


def load(path: Path) -> Manifest | None:
    """The manifest at `path`, or None when absent or unusable (a broken one counts as absent)."""
    try:
        raw, _ = nofollow.read_bytes(path.parent, path.name, max_bytes=_MAX_BYTES)
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.warning("Ignoring unusable docs manifest %s: %s", path, exc)
        return None
    if not isinstance(data, dict) or not isinstance(data.get("version"), str):
        logger.warning("Ignoring docs manifest %s: no version in it", path)
        return None
    hashes = data.get("hashes")
    changed = data.get("changed")
    previous = data.get("previous_version")
    return Manifest(
        version=data["version"],
        hashes={k: v for k, v in hashes.items() if isinstance(v, str)} if isinstance(hashes, dict) else {},
        changed=frozenset(c for c in changed if isinstance(c, str)) if isinstance(changed, list) else frozenset(),
        previous_version=previous if isinstance(previous, str) else None,
    )


def bump(old: Manifest | None, version: str, hashes: dict[str, str]) -> Manifest:
    """The manifest after moving to `version`: ids whose hash differs (or is new) are changed.

    With no previous manifest (first run) nothing is changed.
    """
    if old is None or not old.hashes:
        changed: frozenset[str] = frozenset()
    else:
        changed = frozenset(k for k, v in hashes.items() if old.hashes.get(k) != v)
    return Manifest(
        version=version,
        hashes=hashes,
        changed=changed,
        previous_version=old.version if old is not None else None,
    )


def save(path: Path, manifest: Manifest) -> None:
    """Write the manifest atomically (sorted, so it diffs cleanly if a human looks)."""
    data = {
        "version": manifest.version,
        "previous_version": manifest.previous_version,
        "changed": sorted(manifest.changed),
        "hashes": dict(sorted(manifest.hashes.items())),
    }
    write_atomic(path, json.dumps(data, indent=1) + "\n", durable=False)
