"""Settings: each key declared once, TOML load with deep merge, key aliases, platform paths.

Every key is a field of one section dataclass, declared once with its default and, in the
field's metadata, the comment line it gets and the bounds it must keep. ``SCHEMA`` is read off
those fields, and drives the rest: type validation, ``config.example.toml`` / ``biopb-mcp config
init`` (``render_example``) and ``biopb-mcp config show`` (``render_show``). The environment is
read here only (``BIOPB_CONFIG_DIR`` and the platform dirs); the rest of the package takes a
``Settings``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import threading
import tomllib
import typing
import warnings as _warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import platformdirs
import tomli_w

from biopb_mcp.config.toml_lines import key_lines, leading_key
from biopb_mcp.errors import ConfigError, ConfigProblem

__all__ = [
    "ALIASES",
    "CONFIG_DIR_ENV",
    "CONFIG_FILE_NAME",
    "KERNEL_START_KEYS",
    "SCHEMA",
    "SECTIONS",
    "ComputeSettings",
    "ConfigWarning",
    "DocsSettings",
    "HttpSettings",
    "KernelSettings",
    "Key",
    "OutputsSettings",
    "RecordSettings",
    "ServerSettings",
    "ServicesSettings",
    "Settings",
    "WarningKind",
    "config_dir",
    "defaults",
    "load_settings",
    "render_example",
    "render_show",
    "reread_kernel_start_keys",
    "resolve_user_path",
]

CONFIG_DIR_ENV = "BIOPB_CONFIG_DIR"
"""Environment variable that moves the whole config tree: config file, local docs, kernel plugins,
and (unless the config moves them) the state and runtime dirs."""

CONFIG_FILE_NAME = "config.toml"
STATE_SUBDIR = "state"
"""The state dir inside a config tree of its own (see ``_is_own_tree``), unless the config moves it."""
RUNTIME_SUBDIR = "run"
"""The runtime dir inside a config tree of its own, created 0700, unless the config moves it."""
APP_NAME = "biopb"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_TYPE_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list[str]": "a list of strings",
}

_MAX_PORT = 65535

WARM_IMPORTS = (
    "numpy",
    "scipy.ndimage",
    "skimage",
    "skimage.filters",
    "skimage.measure",
    "skimage.morphology",
    "skimage.segmentation",
    "skimage.feature",
    "skimage.exposure",
    "skimage.transform",
    "tifffile",
    "matplotlib.pyplot",
)
"""The imports the shipped procedures start with: what a first analysis cell would pay for."""

_MAX_SECONDS = int(threading.TIMEOUT_MAX)
"""Largest float value (every float key is seconds): nan never compares and a bigger timeout
overflows a lock wait, so either would break a tool call instead of bounding it."""

_SCHEDULER_ADDRESS = re.compile(r"(tcp|tls|ws|wss|inproc|ucx)://\S+")
_MEMORY = re.compile(r"(auto|\d+(\.\d+)?\s*([kKMGT]i?B|[kKMGT]|B)?)")

Check = Callable[[Any], str | None]
"""A key's own rule beyond type, choices and minimum: the value -> what it must be, or None if fine."""


def _about(
    doc: str, *, choices: tuple[str, ...] = (), minimum: float | None = None, check: Check | None = None
) -> dict[str, Any]:
    """A config key's field metadata: the comment line above it in the example file, its bounds."""
    return {"doc": doc, "choices": choices, "minimum": minimum, "check": check}


def _port_in_range(value: int) -> str | None:
    return f"at most {_MAX_PORT}" if value > _MAX_PORT else None


# dask would reject these only at first use, inside the kernel, far from the config file
def _scheduler(value: str) -> str | None:
    if value in ("none", "local") or _SCHEDULER_ADDRESS.fullmatch(value):
        return None
    return '"none", "local" or a scheduler address such as "tcp://host:8786"'


def _memory_size(value: str) -> str | None:
    return None if _MEMORY.fullmatch(value.strip()) else '"auto" or a size such as "4GB" or "512MiB"'


# A section's docstring is the comment line above it in the example file. A `Path | None` field is
# a path key: a string in the file, "" (None here) meaning the default the loader derives.


@dataclass(frozen=True)
class ServicesSettings:
    """Where the agent-editable docs live."""

    docs_local_dir: Path | None = field(
        default=None,
        metadata=_about(
            'Local (writable) docs tier; "" = <config dir>/docs. ~ expands; relative = under the config dir.'
        ),
    )


@dataclass(frozen=True)
class ServerSettings:
    """Server process: state, runtime and log locations, log level, tool-call trace."""

    state_dir: Path | None = field(
        default=None,
        metadata=_about(
            "Server and kernel logs, the search index, session notebooks, the stable HTTP token and "
            'images too big to return; "" = <config dir>/state when $BIOPB_CONFIG_DIR names the config '
            "dir, else the platform state dir (Linux: ~/.local/state/biopb)."
        ),
    )
    runtime_dir: Path | None = field(
        default=None,
        metadata=_about(
            "Kernel connection files, HTTP token files and the %biopb magics' files; one that others "
            'can enter gets a private biopb-mcp-<uid> subdir (its own mode is never changed); "" = '
            "<config dir>/run (0700) when $BIOPB_CONFIG_DIR names the config dir, else the platform "
            "runtime dir."
        ),
    )
    log_file: Path | None = field(default=None, metadata=_about('Server log file; "" = <state_dir>/server.log.'))
    log_level: str = field(
        default="INFO", metadata=_about("Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.", choices=LOG_LEVELS)
    )
    trace: Path | None = field(
        default=None,
        metadata=_about('Write one JSON line per tool call to this file; "" = off (biopb-mcp --trace overrides).'),
    )


@dataclass(frozen=True)
class KernelSettings:
    """The IPython kernel the server manages."""

    name: str = field(
        default="",
        metadata=_about(
            'Jupyter kernel spec to run (see `jupyter kernelspec list`); "" = the Python running the server.'
        ),
    )
    promote_after: float = field(
        default=10.0,
        metadata=_about(
            "Seconds execute_code waits before turning the run into a background job (poll_job).", minimum=0.0
        ),
    )
    max_output_chars: int = field(
        default=20000,
        metadata=_about("Text output kept per call; the rest is cut with a note saying how much.", minimum=1),
    )
    max_image_bytes: int = field(
        default=1_000_000,
        metadata=_about("Largest PNG returned inline; bigger ones are saved to a file named in the output.", minimum=1),
    )
    max_images: int = field(
        default=10,
        metadata=_about(
            "PNGs returned inline per execution; the rest are saved to files named in the output.", minimum=0
        ),
    )
    max_result_bytes: int = field(
        default=1_000_000,
        metadata=_about(
            "Largest tool result as sent (text, base64 images, JSON): clients drop a bigger one whole, "
            "so images are downscaled or left out to fit (their files stay).",
            minimum=65536,
        ),
    )
    max_kept_bytes: int = field(
        default=128 * 1024 * 1024,
        metadata=_about(
            "Memory for executions' output kept for paging (text at Python's cost, up to 4 bytes a "
            "character; errors; inline images), across executions: the oldest are forgotten past it, "
            "and one execution keeps a quarter of it, saving the rest of its output to a file it names.",
            minimum=65536,
        ),
    )
    startup_timeout: float = field(
        default=60.0, metadata=_about("Seconds start_kernel waits for the kernel to become ready.", minimum=0.1)
    )
    request_timeout: float = field(
        default=30.0,
        metadata=_about("Seconds to wait for a kernel reply (inspect, interrupt) before giving up.", minimum=0.1),
    )
    lazy_image_mb: float = field(
        default=512.0,
        metadata=_about(
            "open_image() gives a lazy dask array for an image bigger than this (MB), numpy below it.",
            minimum=0.0,
        ),
    )
    existing: str = field(
        default="",
        metadata=_about(
            "Join this kernel instead of starting one: its connection file, a name in Jupyter's runtime "
            'dir, or "kernel-*.json" for the newest (biopb-mcp --existing overrides); "" = start our own.'
        ),
    )
    existing_plugins: bool = field(
        default=False,
        metadata=_about(
            "Load the kernel plugins into a joined kernel too (once per attach); false = leave it as it is "
            "but for the Qt wake-up that keeps napari from hanging it."
        ),
    )
    warm_imports: list[str] = field(
        default_factory=lambda: list(WARM_IMPORTS),
        metadata=_about(
            "Modules a started kernel imports in the background, between cells, so a first analysis "
            "cell finds them loaded; [] = none."
        ),
    )


@dataclass(frozen=True)
class DocsSettings:
    """The docs store."""

    history_keep: int = field(
        default=50, metadata=_about("Previous versions kept per doc in the hidden history folder.", minimum=1)
    )
    withhold: list[str] = field(
        default_factory=list,
        metadata=_about(
            "Shipped doc ids this server withholds: never listed, read, searched or named in a link, "
            "as if not shipped (a bench's docs-off arm; a procedure your lab must not use)."
        ),
    )


@dataclass(frozen=True)
class HttpSettings:
    """Streamable HTTP transport (biopb-mcp --transport http); always bound to 127.0.0.1."""

    port: int = field(
        default=8765,
        metadata=_about("TCP port on 127.0.0.1 (biopb-mcp --port overrides).", minimum=0, check=_port_in_range),
    )
    allowed_hosts: list[str] = field(
        default_factory=list, metadata=_about("Extra Host header values accepted (localhost and 127.0.0.1 always are).")
    )
    allowed_origins: list[str] = field(
        default_factory=list, metadata=_about("Extra Origin header values accepted (browser clients).")
    )
    auth: bool = field(
        default=True, metadata=_about("Require the per-server bearer token (biopb-mcp --no-auth overrides).")
    )
    token: str = field(
        default="stable",
        metadata=_about(
            'Bearer token: "stable" (kept 0600 in the state dir, reused; --rotate-token renews it) '
            'or "per-start" (new every start).',
            choices=("stable", "per-start"),
        ),
    )


@dataclass(frozen=True)
class RecordSettings:
    """The session notebook: every execute_code and doc read/write, one notebook per kernel start."""

    enabled: bool = field(default=True, metadata=_about("Record the session as a notebook (false = off)."))
    # filled in by load_settings (never None once loaded): the recorder is handed this section alone
    dir: Path | None = field(
        default=None, metadata=_about('Where the session notebooks go; "" = <state_dir>/notebooks.')
    )
    max_output_chars: int = field(
        default=100_000,
        metadata=_about("Text output kept per notebook cell; the rest is replaced by a note.", minimum=1),
    )


@dataclass(frozen=True)
class ComputeSettings:
    """Dask in the kernel: dask_client() connects to this cluster on first use."""

    scheduler: str = field(
        default="none",
        metadata=_about(
            '"none" (dask in the kernel process), "local" (a cluster the kernel starts) or an '
            'address ("tcp://host:8786").',
            check=_scheduler,
        ),
    )
    workers: int = field(
        default=0,
        metadata=_about("Local cluster: worker processes; 0 = dask's choice (about one per core).", minimum=0),
    )
    threads_per_worker: int = field(
        default=0, metadata=_about("Local cluster: threads in each worker; 0 = dask's choice.", minimum=0)
    )
    memory_limit: str = field(
        default="auto",
        metadata=_about(
            'Local cluster: memory per worker, e.g. "4GB" or "512MiB"; "auto" = system memory / workers.',
            check=_memory_size,
        ),
    )
    connect_timeout: float = field(
        default=10.0,
        metadata=_about("Seconds dask_client() waits for the scheduler before saying it is unreachable.", minimum=0.1),
    )


_PATTERN_FIELDS = ("stem", "step", "ext", "source_dir")


def _pattern_fields(value: str) -> list[str] | str:
    """The placeholders of a results pattern, or what is wrong with it."""
    import string

    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
    except ValueError as exc:
        return f"a pattern with balanced braces ({exc})"
    unknown = [f for f in fields if f not in _PATTERN_FIELDS]
    if unknown:
        return f"a pattern using only {{{'}, {'.join(_PATTERN_FIELDS)}}} (not {{{unknown[0]}}})"
    return fields


def _results_pattern(value: str) -> str | None:
    fields = _pattern_fields(value)
    if isinstance(fields, str):
        return fields
    if "step" not in fields or "ext" not in fields:
        return "a pattern naming {step} and {ext}, so each step's file is its own"
    return None


def _fixed_names(value: list[str]) -> str | None:
    for entry in value:
        step, sep, name = entry.partition("=")
        step, name = step.strip(), name.strip()
        if not sep or not step or not name or any(c in step for c in "/\\"):
            return f'entries "step=file name" such as "nuclei-labels=labels.tif" (not {entry!r})'
        fields = _pattern_fields(name)
        if isinstance(fields, str):
            return f"{fields} in {entry!r}"
    return None


@dataclass(frozen=True)
class OutputsSettings:
    """Where the kernel's save helpers (save_labels, save_table, ...) write, and the lab's table format."""

    path: str = field(
        default="{source_dir}/results/{stem}_{step}.{ext}",
        metadata=_about(
            "Results path pattern: {source_dir} (the raw file's folder), {stem} (its name up to the first "
            "dot), {step}, {ext}; a relative pattern is under {source_dir}.",
            check=_results_pattern,
        ),
    )
    names: list[str] = field(
        default_factory=list,
        metadata=_about(
            'Fixed file names per step, "step=name" (e.g. "nuclei-labels=labels.tif"), in the pattern\'s '
            "folder; {stem} and {ext} allowed.",
            check=_fixed_names,
        ),
    )
    table_delimiter: str = field(
        default=",", metadata=_about('Table column delimiter: ",", ";" or "\\t".', choices=(",", ";", "\t"))
    )
    decimal_mark: str = field(
        default=".",
        metadata=_about('Decimal mark in tables: "." or "," (with ";" or tab as delimiter).', choices=(".", ",")),
    )


_SECTION_TYPES: dict[str, type[Any]] = {
    "services": ServicesSettings,
    "server": ServerSettings,
    "kernel": KernelSettings,
    "docs": DocsSettings,
    "http": HttpSettings,
    "record": RecordSettings,
    "compute": ComputeSettings,
    "outputs": OutputsSettings,
}
"""Section name -> its dataclass, in file order; ``Settings`` has an attribute of each name."""


class WarningKind(StrEnum):
    """What a config warning is about; its facts are named beside each kind."""

    ALIAS_USED = "alias_used"
    """An old key's value is used for its new name: ``old``, ``new``."""
    ALIAS_IGNORED = "alias_ignored"
    """An old key is ignored because its new name is set too: ``old``, ``new``, ``source``."""
    RUNTIME_FALLBACK = "runtime_fallback"
    """No per-user runtime dir (no XDG_RUNTIME_DIR): platformdirs' ``message``, the ``path`` used."""


@dataclass(frozen=True)
class ConfigWarning:
    """Something in effect that is probably not what was meant, as facts (``biopb_mcp.text.config``
    words it); ``where`` is the ``<file>:<line>`` it is about, "" when it is about no file line."""

    kind: WarningKind
    where: str = ""
    facts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """The merged, validated configuration with every path resolved.

    Each section holds the keys as the file set them (a path key: resolved, or None when unset);
    the paths in effect, defaults derived, are the attributes here (``state_dir``, ``log_file``,
    ...). ``sources`` maps each dotted key to ``"default"``, ``"<file>:<line>"`` or
    ``"alias services.skills_local_dir (<file>:<line>)"``; ``warnings`` holds what is probably
    unintended (such as deprecations) for whoever sets up logging to log.
    """

    config_dir: Path
    config_file: Path
    docs_local_dir: Path
    state_dir: Path
    runtime_dir: Path
    log_file: Path
    kernel_log_file: Path
    plugins_dir: Path
    trace_file: Path | None
    kernel: KernelSettings = field(default_factory=KernelSettings)
    docs: DocsSettings = field(default_factory=DocsSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    record: RecordSettings = field(default_factory=RecordSettings)
    compute: ComputeSettings = field(default_factory=ComputeSettings)
    outputs: OutputsSettings = field(default_factory=OutputsSettings)
    services: ServicesSettings = field(default_factory=ServicesSettings)
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[ConfigWarning] = field(default_factory=list)

    @property
    def search_db(self) -> Path:
        """The docs search index: a cache of the docs' text, shared by the servers of this config."""
        return self.state_dir / "search.sqlite3"


@dataclass(frozen=True)
class Key:
    """One config key, read off its section's field: where it lives, its type, default and comment."""

    section: str
    name: str
    type: str  # one of _TYPE_NAMES
    default: Any  # as written in the file: "" for a path key left to its derived default
    doc: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    check: Check | None = None
    is_path: bool = False

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"


_FILE_TYPES: dict[Any, str] = {str: "str", int: "int", float: "float", bool: "bool", list[str]: "list[str]"}


def _keys_of(section: str, cls: type[Any]) -> list[Key]:
    """The keys a section dataclass declares; a field the file cannot hold fails at import."""
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if "doc" not in f.metadata or (hint != Path | None and hint not in _FILE_TYPES):
            raise TypeError(
                f"{cls.__name__}.{f.name}: a config key needs metadata=_about(...) and one "
                f"of the types {', '.join(_TYPE_NAMES)} or Path | None, not {hint}"
            )
        default: Any
        if hint == Path | None:
            file_type, default, is_path = "str", "", True
        else:
            file_type, is_path = _FILE_TYPES[hint], False
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        keys.append(
            Key(
                section,
                f.name,
                file_type,
                default,
                f.metadata["doc"],
                f.metadata["choices"],
                f.metadata["minimum"],
                f.metadata["check"],
                is_path,
            )
        )
    return keys


SECTIONS: dict[str, str] = {name: " ".join((cls.__doc__ or "").split()) for name, cls in _SECTION_TYPES.items()}
"""Section name -> the comment line above it in the example file."""

SCHEMA: tuple[Key, ...] = tuple(k for name, cls in _SECTION_TYPES.items() for k in _keys_of(name, cls))
"""Every config key, in file order, read off the section dataclasses (where each default is written)."""

_BY_DOTTED: dict[str, Key] = {k.dotted: k for k in SCHEMA}

ALIASES: dict[str, str] = {"services.skills_local_dir": "services.docs_local_dir"}
"""Old key -> new key, accepted for one release with a deprecation warning; the new key wins."""


def config_dir() -> Path:
    """``$BIOPB_CONFIG_DIR`` if set (non-empty), else the platform config dir (``~/.config/biopb``)."""
    env = os.environ.get(CONFIG_DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser().absolute()
    return Path(platformdirs.user_config_dir(APP_NAME))


_env_config_dir = config_dir  # load_settings' parameter shadows the function's name


def defaults() -> dict[str, dict[str, Any]]:
    """The default config as nested dicts (fresh copies: callers may mutate them)."""
    out: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    for key in SCHEMA:
        value = key.default
        out[key.section][key.name] = list(value) if isinstance(value, list) else value
    return out


def load_settings(config_dir: Path | None = None) -> Settings:
    """Read ``<config dir>/config.toml`` (missing file = defaults), validate it, resolve paths.

    Args:
        config_dir: the config dir; default ``config_dir()`` (env, then platform).

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds an unknown section or key or a
            value of the wrong type; the message names the file, the line where known, and the key.
    """
    cdir = Path(config_dir).expanduser().absolute() if config_dir is not None else _env_config_dir()
    cfile = cdir / CONFIG_FILE_NAME
    merged = defaults()
    sources = {k.dotted: "default" for k in SCHEMA}
    lines: dict[str, int | None] = {}
    warnings: list[ConfigWarning] = []

    text = _read_text(cfile)
    if text is not None:
        data = _parse(text, cfile)
        lines = _merge(data, merged, sources, warnings, cfile, key_lines(text))

    def section(name: str) -> Any:
        values = {}
        for key in (k for k in SCHEMA if k.section == name):
            raw = merged[name][key.name]
            if key.is_path:
                raw = None if raw == "" else _resolve_path(raw, cdir, cfile, key.dotted, lines.get(key.dotted))
            values[key.name] = raw
        return _SECTION_TYPES[name](**values)

    sections = {name: section(name) for name in _SECTION_TYPES}
    outputs: OutputsSettings = sections["outputs"]
    if outputs.decimal_mark == outputs.table_delimiter:
        raise ConfigError(
            f'outputs.decimal_mark "{outputs.decimal_mark}" cannot also be the table delimiter',
            path=cfile,
            line=lines.get("outputs.decimal_mark"),
            key="outputs.decimal_mark",
            kind=ConfigProblem.MARK_IS_DELIMITER,
        )
    server: ServerSettings = sections["server"]
    own_tree = _is_own_tree(cdir)
    state_dir = server.state_dir or (cdir / STATE_SUBDIR if own_tree else Path(platformdirs.user_state_dir(APP_NAME)))
    record: RecordSettings = sections["record"]
    sections["record"] = dataclasses.replace(record, dir=record.dir or state_dir / "notebooks")
    return Settings(
        config_dir=cdir,
        config_file=cfile,
        docs_local_dir=sections["services"].docs_local_dir or cdir / "docs",
        state_dir=state_dir,
        runtime_dir=server.runtime_dir or (cdir / RUNTIME_SUBDIR if own_tree else _platform_runtime_dir(warnings)),
        log_file=server.log_file or state_dir / "server.log",
        kernel_log_file=state_dir / "kernel.log",
        plugins_dir=cdir / "kernel",
        trace_file=server.trace,
        sources=sources,
        warnings=warnings,
        **sections,
    )


def _is_own_tree(cdir: Path) -> bool:
    """Whether ``cdir`` is a config tree of its own (``$BIOPB_CONFIG_DIR`` or a dir passed in)
    rather than the platform one: such a tree keeps its state and runtime files inside it, so
    its servers never share a search index, token or kernel connection files with another
    tree's, and ``console`` finds only its own servers' kernels."""
    platform = Path(platformdirs.user_config_dir(APP_NAME)).expanduser().absolute()
    return cdir != platform


def _platform_runtime_dir(warnings: list[ConfigWarning]) -> Path:
    """platformdirs' runtime dir; its fallback warning (no XDG_RUNTIME_DIR) goes into ``warnings``."""
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        path = Path(platformdirs.user_runtime_dir(APP_NAME))
    warnings.extend(
        ConfigWarning(WarningKind.RUNTIME_FALLBACK, facts={"message": str(w.message), "path": str(path)})
        for w in caught
    )
    return path


# --- reading and validating ------------------------------------------------------------------


def _read_text(cfile: Path) -> str | None:
    """The config file's text, or None when there is none (= all defaults)."""
    try:
        raw = cfile.read_bytes()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise ConfigError(
            f"the config dir {cfile.parent} is not a directory",
            path=cfile,
            kind=ConfigProblem.CONFIG_DIR_NOT_A_DIR,
            config_dir=str(cfile.parent),
        ) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a config file", path=cfile, kind=ConfigProblem.FILE_IS_A_DIR) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror or exc}", path=cfile) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError("is not UTF-8 text", path=cfile, line=line, kind=ConfigProblem.NOT_UTF8) from None


def _parse(text: str, cfile: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason, line = _decode_error(exc)
        lines = text.split("\n")  # as TOML counts lines: str.splitlines also breaks at \x85 and more
        key = leading_key(lines[line - 1]) if line is not None and line <= len(lines) else None
        what = f" (key {key})" if key else ""
        raise ConfigError(
            f"invalid TOML{what}: {reason}", path=cfile, line=line, key=key, kind=ConfigProblem.BAD_TOML, reason=reason
        ) from None


_DECODE_POSITION = re.compile(r"\s*\(at (?:line (\d+), column \d+|end of document)\)$")


def _decode_error(exc: tomllib.TOMLDecodeError) -> tuple[str, int | None]:
    """tomllib's reason and line: attributes from Python 3.14, before that only in the message."""
    lineno = getattr(exc, "lineno", None)
    if isinstance(lineno, int):
        return str(getattr(exc, "msg", exc)), lineno
    message = str(exc)
    m = _DECODE_POSITION.search(message)
    if m is None:
        return message, None
    return message[: m.start()], int(m.group(1)) if m.group(1) else None


def _merge(
    data: dict[str, Any],
    merged: dict[str, dict[str, Any]],
    sources: dict[str, str],
    warnings: list[ConfigWarning],
    cfile: Path,
    lines: dict[str, int],
) -> dict[str, int | None]:
    """Deep-merge the file over the defaults: a partial section overrides only its own keys.

    Returns the line each key the file sets is on (None where it cannot be told).
    """
    key_line: dict[str, int | None] = {}
    alias_values: dict[str, tuple[str, Any, int | None]] = {}
    for section, body in data.items():
        if section not in SECTIONS and not isinstance(body, dict):
            homes = [f"[{k.section}]" for k in SCHEMA if k.name == section]
            hint = f" ({section} is a key of {' and '.join(homes)})" if homes else _closest_key(section)
            raise ConfigError(
                f"{section} is a key outside any section; every key belongs under a section header"
                f"{hint}; sections: {', '.join(f'[{name}]' for name in SECTIONS)}",
                path=cfile,
                line=lines.get(section),
                key=section,
            )
        if section not in SECTIONS:
            hint = _closest(section, SECTIONS)
            raise ConfigError(
                f"unknown section [{section}]{hint}; known sections: {', '.join(SECTIONS)}",
                path=cfile,
                line=lines.get(section),
                key=section,
            )
        if not isinstance(body, dict):
            raise ConfigError(
                f"{section} must be a table ([{section}] with keys under it), got {_describe(body)}",
                path=cfile,
                line=lines.get(section),
                key=section,
            )
        for name, value in body.items():
            dotted = f"{section}.{name}"
            line = lines.get(dotted, lines.get(section))
            if dotted in ALIASES:
                checked = _check_type(_BY_DOTTED[ALIASES[dotted]], value, cfile, line, shown=dotted)
                alias_values[dotted] = (_where(cfile, line), checked, line)
                continue
            key = _BY_DOTTED.get(dotted)
            if key is None:
                known = [k.name for k in SCHEMA if k.section == section]
                hint = _closest(name, known)
                raise ConfigError(
                    f"unknown key {dotted}{hint}; keys in [{section}]: {', '.join(known)}",
                    path=cfile,
                    line=line,
                    key=dotted,
                )
            merged[section][name] = _check_type(key, value, cfile, line)
            sources[dotted] = _where(cfile, line)
            key_line[dotted] = line
    for old, (where, value, line) in alias_values.items():
        new = ALIASES[old]
        if sources[new] == "default":
            section, name = new.split(".")
            merged[section][name] = value
            sources[new] = f"alias {old} ({where})"
            key_line[new] = line
            warnings.append(ConfigWarning(WarningKind.ALIAS_USED, where, {"old": old, "new": new}))
        else:
            facts = {"old": old, "new": new, "source": sources[new]}
            warnings.append(ConfigWarning(WarningKind.ALIAS_IGNORED, where, facts))
    return key_line


def _check_type(key: Key, value: Any, cfile: Path, line: int | None, *, shown: str | None = None) -> Any:
    """Return the value (an int widened to float where a float is declared) or raise ConfigError."""
    dotted = shown or key.dotted
    ok: bool
    if key.type == "bool":
        ok = isinstance(value, bool)
    elif key.type == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif key.type == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            value = float(value)
    elif key.type == "str":
        ok = isinstance(value, str)
    else:  # list[str]
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not ok:
        example = _toml_line(key.name, key.default)
        raise ConfigError(
            f"{dotted} must be {_TYPE_NAMES[key.type]}, got {_describe(value)}; e.g. {example}",
            path=cfile,
            line=line,
            key=dotted,
        )
    if key.type == "float" and not (math.isfinite(value) and value <= _MAX_SECONDS):
        raise ConfigError(
            f"{dotted} must be a finite number no larger than {_MAX_SECONDS}, got {value!r}",
            path=cfile,
            line=line,
            key=dotted,
        )
    if key.choices and value not in key.choices:
        raise ConfigError(
            f"{dotted} must be one of {', '.join(key.choices)}, got {value!r}", path=cfile, line=line, key=dotted
        )
    if key.minimum is not None and value < key.minimum:
        raise ConfigError(
            f"{dotted} must be at least {key.minimum:g}, got {value!r}", path=cfile, line=line, key=dotted
        )
    wanted = key.check(value) if key.check is not None else None
    if wanted is not None:
        raise ConfigError(f"{dotted} must be {wanted}, got {value!r}", path=cfile, line=line, key=dotted)
    if key.type == "str" and "\x00" in value:
        raise ConfigError(f"{dotted} must not contain a NUL character", path=cfile, line=line, key=dotted)
    return value


def _describe(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}
    kind = next((v for t, v in kinds.items() if isinstance(value, t)), type(value).__name__)
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{kind} ({shown})"


def _closest(word: str, options: Any) -> str:
    match = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {match[0]}?)" if match else ""


def _closest_key(name: str) -> str:
    """A hint naming the key a stray top-level ``name`` was probably meant to be, or ""."""
    match = difflib.get_close_matches(name, [k.name for k in SCHEMA], n=1)
    if not match:
        return ""
    homes = " and ".join(f"[{k.section}] {k.name}" for k in SCHEMA if k.name == match[0])
    return f" (did you mean {homes}?)"


def _where(cfile: Path, line: int | None) -> str:
    return f"{cfile}:{line}" if line is not None else str(cfile)


def _resolve_path(raw: str, cdir: Path, cfile: Path, dotted: str, line: int | None) -> Path:
    """``~`` expanded; a relative path is taken relative to the config dir."""
    try:
        p = Path(raw).expanduser()
    except RuntimeError as exc:  # "~user" for an unknown user
        raise ConfigError(f"{dotted}: cannot expand {raw!r}: {exc}", path=cfile, line=line, key=dotted) from None
    return p if p.is_absolute() else cdir / p


KERNEL_START_KEYS = ("kernel.name", "kernel.warm_imports", "compute", "outputs")
"""What a kernel start applies and so re-reads from the file: the kernel spec, the warm imports and the whole
``[compute]`` and ``[outputs]`` sections (the kernel's dask and save helpers are configured when
the kernel starts)."""


def reread_kernel_start_keys(settings: Settings) -> tuple[Settings, list[str]]:
    """``settings`` with ``KERNEL_START_KEYS`` as the config file holds them now.

    A user fixes ``kernel.name`` or sets ``[compute] scheduler`` in the file; the next
    start_kernel/restart_kernel must apply it without a server restart. Every other key keeps
    the value the server started with. A missing file changes nothing (the server may run on
    settings built in code).

    Returns:
        The settings to use, and the dotted keys whose value changed (empty: ``settings`` itself).

    Raises:
        ConfigError: the file is bad now; ``settings`` stay as they were.
    """
    if not settings.config_file.is_file():
        return settings, []
    fresh = load_settings(settings.config_dir)
    kernel = dataclasses.replace(settings.kernel, name=fresh.kernel.name, warm_imports=fresh.kernel.warm_imports)
    changed = [
        k.dotted
        for k in SCHEMA
        if (k.dotted in KERNEL_START_KEYS or k.section in KERNEL_START_KEYS)
        and getattr(getattr(settings, k.section), k.name) != getattr(getattr(fresh, k.section), k.name)
    ]
    if not changed:
        return settings, []
    sources = {**settings.sources, **{key: fresh.sources[key] for key in changed}}
    return (
        dataclasses.replace(settings, kernel=kernel, compute=fresh.compute, outputs=fresh.outputs, sources=sources),
        changed,
    )


def resolve_user_path(settings: Settings, path: Path | str) -> Path:
    """A path given on the command line, by the rule the config file's paths follow: ``~``
    expanded, a relative path under the config dir (a client launches the server from a working
    dir nobody chose, so the working dir cannot be the anchor)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else settings.config_dir / p


# --- rendering -------------------------------------------------------------------------------


_EXAMPLE_HEAD = """\
# biopb-mcp configuration: every key with its default, commented out, so this file changes
# nothing as it stands; uncomment a line (drop the leading "# ") and edit it to change that key.
# Read from $BIOPB_CONFIG_DIR/config.toml, else the platform config dir
# (Linux: ~/.config/biopb/config.toml). A missing key keeps its default.
# `biopb-mcp config show` prints the merged config and where each value came from.
"""


def _toml_line(name: str, value: Any) -> str:
    """``name = value`` on one line (tomli_w breaks a long list over several, which a commented
    example line or a one-line message cannot hold)."""
    if isinstance(value, list):
        items = ", ".join(tomli_w.dumps({"v": v}).strip()[len("v = ") :] for v in value)
        return f"{tomli_w.dumps({name: []}).strip()[:-2]}[{items}]"
    return tomli_w.dumps({name: value}).strip()


def render_example() -> str:
    """The commented config file with every default: ``config.example.toml`` and ``config init``."""
    parts = [_EXAMPLE_HEAD]
    for section, about in SECTIONS.items():
        parts.append(f"\n# {about}\n[{section}]\n")
        for key in (k for k in SCHEMA if k.section == section):
            # The value line is a comment too: `config show` then attributes every key the user
            # has not uncommented to its default, not to this file.
            parts.append(f"# {key.doc}\n# {_toml_line(key.name, key.default)}\n")
    return "".join(parts)


def render_show(settings: Settings) -> str:
    """The merged config as TOML, each value followed by where it came from, then resolved paths."""
    source_env = os.environ.get(CONFIG_DIR_ENV, "").strip()
    cfile = settings.config_file
    present = "" if cfile.is_file() else " (not present: every value is the default)"
    out = [
        f"# config dir:  {settings.config_dir}"
        + (f" (from ${CONFIG_DIR_ENV})" if source_env else " (platform default)"),
        f"# config file: {cfile}{present}",
    ]
    values = _current_values(settings)
    for section in SECTIONS:
        out.append(f"\n[{section}]")
        for key in (k for k in SCHEMA if k.section == section):
            line = _toml_line(key.name, values[key.dotted])
            out.append(f"{line:<40} # {settings.sources.get(key.dotted, 'default')}")
    out.append("\n# resolved paths")
    for label, path in (
        ("docs_local_dir", settings.docs_local_dir),
        ("plugins_dir", settings.plugins_dir),
        ("state_dir", settings.state_dir),
        ("runtime_dir", settings.runtime_dir),
        ("log_file", settings.log_file),
        ("kernel_log_file", settings.kernel_log_file),
        ("trace_file", settings.trace_file or "(off)"),
        ("record_dir", settings.record.dir if settings.record.enabled else "(off)"),
    ):
        out.append(f"#   {label:<16} {path}")
    return "\n".join(out) + "\n"


def _current_values(settings: Settings) -> dict[str, Any]:
    """Dotted key -> the value in effect, as TOML writes it (a path key: "" while left to its default)."""
    values: dict[str, Any] = {}
    for key in SCHEMA:
        value = getattr(getattr(settings, key.section), key.name)
        if key.is_path:
            from_default = settings.sources.get(key.dotted, "default") == "default"
            value = "" if (from_default or value is None) else str(value)
        values[key.dotted] = value
    return values
