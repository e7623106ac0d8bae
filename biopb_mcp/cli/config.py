"""``biopb-mcp config …``: write the commented default config file (init), print the merged one (show)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from biopb_mcp.cli.usage import print_warnings
from biopb_mcp.config.settings import (
    CONFIG_FILE_NAME,
    config_dir,
    load_settings,
    render_example,
    render_show,
)
from biopb_mcp.errors import ConfigError, ConfigProblem
from biopb_mcp.fs import nofollow

__all__ = ["init_config", "run_config"]


def init_config(cdir: Path, *, force: bool = False) -> Path:
    """Write the commented default config file into ``cdir``; returns its path.

    Written through the package's one atomic write (created 0600, renamed into place), so an
    interrupted init leaves no half file and a link at its name is replaced, never written through.

    Raises:
        ConfigError: the file exists and ``force`` is false, or the dir/file cannot be written.
    """
    cfile = cdir / CONFIG_FILE_NAME
    if not force and (cfile.exists() or cfile.is_symlink()):
        raise ConfigError("already exists", path=cfile, kind=ConfigProblem.FILE_EXISTS)
    try:
        cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        nofollow.write_atomic(cdir, CONFIG_FILE_NAME, render_example().encode("utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the config file: {exc.strerror or exc}", path=cfile, kind=ConfigProblem.FILE_UNWRITABLE
        ) from None
    return cfile


def run_config(args: argparse.Namespace) -> int:
    if args.config_command == "init":
        path = init_config(config_dir(), force=args.force)
        print(f"wrote {path}")
        return 0
    settings = load_settings()
    print_warnings(settings)
    sys.stdout.write(render_show(settings))
    known = _specs_without(settings.kernel.name)
    if known is not None:
        from biopb_mcp.text.config import unknown_kernel_spec

        print(f"warning: {unknown_kernel_spec(settings.kernel.name, known)}", file=sys.stderr)
    return 0


def _specs_without(name: str) -> list[str] | None:
    """The installed kernel specs when ``kernel.name`` is none of them, else None: caught here,
    not at the agent's first start_kernel."""
    if not name:
        return None
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager().find_kernel_specs()
    return None if name in specs else sorted(specs)
