"""Finding and reading the connection file of a kernel the server joins but does not own.

``biopb-mcp --existing [FILE]`` and ``kernel.existing`` name it the way ``jupyter console
--existing`` does: a path; a bare name looked up in the current directory and Jupyter's runtime
dir; or nothing, for the most recently used ``kernel-*.json`` there. jupyter-client's own
``find_connection_file`` does the lookup, so both tools pick the same kernel.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from biopb_mcp.errors import KernelError

__all__ = ["find_existing", "read_connection_info"]

_PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def find_existing(spec: str | None) -> Path:
    """The connection file ``spec`` names (None or "": the newest kernel in Jupyter's runtime dir).

    Raises:
        KernelError: nothing matches; the message names where it looked.
    """
    from jupyter_client.connect import find_connection_file
    from jupyter_core.paths import jupyter_runtime_dir

    spec = (spec or "").strip()
    given = Path(spec).expanduser() if spec else None
    if given is not None and (given.is_absolute() or len(given.parts) > 1):
        if not given.is_file():
            raise KernelError(f"no kernel connection file at {given}.")
        return given.resolve()
    try:
        found = find_connection_file(spec or "kernel-*.json")
    except OSError:
        where = f"the current directory or Jupyter's runtime dir {jupyter_runtime_dir()}"
        what = f"no kernel connection file matching {spec!r}" if spec else "no kernel-*.json"
        raise KernelError(
            f"{what} in {where}. Give the file's path (in a notebook, %load_ext biopb_mcp or "
            "%connect_info shows it), or start the notebook's kernel first."
        ) from None
    return Path(found).resolve()


def read_connection_info(path: Path) -> dict[str, Any]:
    """The connection info in ``path``, checked enough that connecting cannot fail on its shape.

    A connection file is written by a frontend, or copied and edited by hand: every field a client
    uses is checked here (types, port ranges, a known transport and signature scheme), so a bad
    one is named instead of failing deep inside jupyter-client or waiting out the start timeout.

    Raises:
        KernelError: unreadable, not JSON, or missing or malformed what a client needs; the
            message names each bad field (never the key's value).
    """
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KernelError(
            f"the kernel connection file {path} is gone: the kernel was shut down (or its frontend removed the file)."
        ) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise KernelError(f"cannot read the kernel connection file {path}: {exc}") from None
    if not isinstance(info, dict):
        raise KernelError(f"{path} is not a kernel connection file (not a JSON object).")
    missing = [k for k in ("transport", "ip", "key", *_PORTS) if k not in info]
    if missing:
        raise KernelError(f"{path} is not a kernel connection file (no {', '.join(missing)}).")
    if info["transport"] not in ("tcp", "ipc"):
        raise KernelError(f"{path}: unknown transport {_shown(info['transport'])} (tcp or ipc expected).")
    bad = [k for k in _PORTS if not _is_port(info[k])]
    if bad:
        raise KernelError(f"{path}: bad port numbers for {', '.join(bad)} (whole numbers from 1 to 65535 expected).")
    info.setdefault("signature_scheme", "hmac-sha256")
    problems = []
    if not isinstance(info["ip"], str) or not info["ip"] or any(c.isspace() or c == "\0" for c in info["ip"]):
        problems.append(f'ip {_shown(info["ip"])} is not an address (text such as "127.0.0.1")')
    if not isinstance(info["key"], str):
        problems.append(f"key is {type(info['key']).__name__}, not text")
    scheme = info["signature_scheme"]
    if not isinstance(scheme, str) or _hash_of(scheme) is None:
        problems.append(
            f"signature_scheme {_shown(scheme)} is not hmac-<hash> with a hash Python knows (e.g. hmac-sha256)"
        )
    problems.extend(_curve_problems(info))
    if "kernel_name" in info and not isinstance(info["kernel_name"], str):
        problems.append(f"kernel_name {_shown(info['kernel_name'])} is not text")
    if problems:
        raise KernelError(f"{path}: {'; '.join(problems)}.")
    return info


_CURVE_KEYS = ("curve_publickey", "curve_secretkey")
_Z85 = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")


def _curve_problems(info: dict[str, object]) -> list[str]:
    """What is wrong with the CurveZMQ keys a Jupyter server adds for transport encryption.

    zmq would refuse a malformed key only when a socket is made, as an error naming no field;
    the values are secrets, so only their names are shown."""
    present = [k for k in _CURVE_KEYS if k in info]
    if not present:
        return []
    if len(present) == 1:
        missing = next(k for k in _CURVE_KEYS if k not in info)
        return [f"{present[0]} is given without {missing} (transport encryption needs both)"]
    return [f"{k} is not a CurveZMQ key (40 characters of Z85 text)" for k in _CURVE_KEYS if not _is_z85_key(info[k])]


def _is_z85_key(value: object) -> bool:
    return isinstance(value, str) and len(value) == 40 and set(value) <= _Z85


def _is_port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def _hash_of(scheme: str) -> str | None:
    """The hashlib name of a signature scheme jupyter-client can sign with, else None."""
    prefix, _, name = scheme.partition("-")
    fixed_size = name in hashlib.algorithms_guaranteed and not name.startswith("shake")
    return name if prefix == "hmac" and fixed_size and callable(getattr(hashlib, name, None)) else None


def _shown(value: object, limit: int = 60) -> str:
    """A field's value as an error quotes it: repr, cut short (the file may be anything)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
