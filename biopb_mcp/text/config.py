"""What a reader reads about a config file that cannot be used: the loader's facts (file, line,
key, what is wrong) and, where it depends on the problem, what to do about it."""

from __future__ import annotations

from biopb_mcp.config.settings import CONFIG_DIR_ENV, ConfigWarning, WarningKind
from biopb_mcp.errors import ConfigError, ConfigProblem, UnsafeRuntimeDir

__all__ = ["config_refusal", "config_warning", "unknown_kernel_spec", "unsafe_runtime_dir"]


def unsafe_runtime_dir(exc: UnsafeRuntimeDir) -> str:
    """The runtime dir's subdirectory that is not private, and the two ways past it (nothing was
    changed there: it may be another user's, or a link planted to catch our secrets)."""
    return f"{exc}; remove it, or point server.runtime_dir at a private directory"


def config_refusal(exc: ConfigError) -> str:
    """The refusal with its next step; a kind without one reads as the loader's message."""
    kind, where = exc.kind, exc.where
    if kind is ConfigProblem.CONFIG_DIR_NOT_A_DIR:
        return (
            f"{where}the config dir {exc.details['config_dir']} is not a directory; point ${CONFIG_DIR_ENV} at a "
            "directory"
        )
    if kind is ConfigProblem.FILE_IS_A_DIR:
        return f"{where}is a directory, not a config file; remove or rename it"
    if kind is ConfigProblem.NOT_UTF8:
        return f"{where}is not UTF-8 text; save it as UTF-8"
    if kind is ConfigProblem.BAD_TOML:
        what = f" (key {exc.key})" if exc.key else ""
        return f"{where}invalid TOML{what}: {exc.details['reason']}; fix that line"
    if kind is ConfigProblem.FILE_EXISTS:
        return f"{exc}; edit it, or rerun with --force to overwrite it with the defaults"
    if kind is ConfigProblem.FILE_UNWRITABLE:
        return f"{exc}; set ${CONFIG_DIR_ENV} to a writable directory"
    if kind is ConfigProblem.LOG_UNWRITABLE:
        return f"{exc}; set server.log_file or server.state_dir in {exc.details['config_file']} to a writable place"
    if kind is ConfigProblem.TOKEN_UNKEPT:
        return (
            f"{exc}; set server.state_dir in {exc.details['config_file']} to a writable directory, or "
            'http.token = "per-start"'
        )
    if kind is ConfigProblem.TOKEN_FILE_UNWRITABLE:
        fix = f"; set server.runtime_dir in {exc.details['config_file']} to a writable directory (or use --no-auth)"
        refused = exc.details.get("refused")
        if isinstance(refused, UnsafeRuntimeDir):  # the statement, with the way past that subdirectory
            return f"cannot write the HTTP token file in {refused.runtime_dir}: {unsafe_runtime_dir(refused)}{fix}"
        return f"{exc}{fix}"
    if kind is ConfigProblem.MARK_IS_DELIMITER:
        return f'{exc}; with a decimal comma set table_delimiter = ";"'
    return str(exc)


def unknown_kernel_spec(name: str, known: list[str]) -> str:
    """``config show``'s warning that ``kernel.name`` names no installed kernel spec (``known``)."""
    return (
        f"kernel.name = {name!r} names no installed Jupyter kernel spec (available: "
        f"{', '.join(known) or 'none installed'}); start_kernel will fail until it does (see `jupyter kernelspec list`)"
    )


def config_warning(warning: ConfigWarning) -> str:
    """A config warning (a deprecated key, the runtime dir's fallback) with what to do about it."""
    facts = warning.facts
    if warning.kind is WarningKind.ALIAS_USED:
        return (
            f"{warning.where}: {facts['old']} is deprecated and will stop working in the next release; rename it "
            f"to {facts['new'].split('.')[1]} (same value)"
        )
    if warning.kind is WarningKind.ALIAS_IGNORED:
        return (
            f"{warning.where}: {facts['old']} is deprecated and ignored because {facts['new']} is also set "
            f"({facts['source']}); delete the {facts['old']} line"
        )
    return f"{facts['message']}; runtime files go to {facts['path']} (set server.runtime_dir to move them)"
