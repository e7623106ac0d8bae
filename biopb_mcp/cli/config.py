"""``biopb-mcp config init``: write the commented default config file."""

from __future__ import annotations

from pathlib import Path

from biopb_mcp.config.settings import CONFIG_DIR_ENV, CONFIG_FILE_NAME, render_example
from biopb_mcp.errors import ConfigError
from biopb_mcp.fs import nofollow

__all__ = ["init_config"]


def init_config(cdir: Path, *, force: bool = False) -> Path:
    """Write the commented default config file into ``cdir``; returns its path.

    Written through the package's one atomic write (created 0600, renamed into place), so an
    interrupted init leaves no half file and a link at its name is replaced, never written through.

    Raises:
        ConfigError: the file exists and ``force`` is false, or the dir/file cannot be written.
    """
    cfile = cdir / CONFIG_FILE_NAME
    if not force and (cfile.exists() or cfile.is_symlink()):
        raise ConfigError("already exists; edit it, or rerun with --force to overwrite it with "
                          "the defaults", path=cfile)
    try:
        cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        nofollow.write_atomic(cdir, CONFIG_FILE_NAME, render_example().encode("utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the config file: {exc.strerror or exc}; set ${CONFIG_DIR_ENV} "
            f"to a writable directory", path=cfile) from None
    return cfile
