"""Settings: defaults in one schema, TOML load with deep merge, key aliases, platform paths.

Every key is declared once, in ``SCHEMA``. The schema drives everything else: the defaults, type
validation, ``config.example.toml`` / ``biopb-mcp config init`` (``render_example``) and
``biopb-mcp config show`` (``render_show``). The environment is read here only (``BIOPB_CONFIG_DIR``
and the platform dirs); the rest of the package takes a ``Settings``.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import threading
import tomllib
import warnings as _warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import tomli_w

from biopb_mcp.errors import ConfigError

__all__ = [
    "ALIASES",
    "CONFIG_DIR_ENV",
    "CONFIG_FILE_NAME",
    "SCHEMA",
    "SECTIONS",
    "ComputeSettings",
    "DocsSettings",
    "HttpSettings",
    "KernelSettings",
    "Key",
    "RecordSettings",
    "ServerSettings",
    "Settings",
    "config_dir",
    "defaults",
    "init_config",
    "load_settings",
    "render_example",
    "render_show",
    "resolve_user_path",
]

CONFIG_DIR_ENV = "BIOPB_CONFIG_DIR"
"""Environment variable that moves the whole config dir (config file, local docs, kernel plugins)."""

CONFIG_FILE_NAME = "config.toml"
APP_NAME = "biopb"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_TYPE_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list[str]": "a list of strings",
}


@dataclass(frozen=True)
class Key:
    """One config key: where it lives, its type, default and the comment line it gets."""

    section: str
    name: str
    type: str  # one of _TYPE_NAMES
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"


SECTIONS: dict[str, str] = {
    "services": "Where the agent-editable docs live.",
    "server": "Server process: state, runtime and log locations, log level, tool-call trace.",
    "kernel": "The IPython kernel the server manages.",
    "docs": "The docs store.",
    "http": "Streamable HTTP transport (biopb-mcp --transport http); always bound to 127.0.0.1.",
    "record": "The session notebook: every execute_code and doc read/write, one notebook per kernel start.",
    "compute": "Dask in the kernel: dask_client() connects to this cluster on first use.",
}
"""Section name -> the comment line above it in the example file."""

SCHEMA: tuple[Key, ...] = (
    Key("services", "docs_local_dir", "str", "",
        'Local (writable) docs tier; "" = <config dir>/docs. ~ expands; relative = under the config dir.'),
    Key("server", "state_dir", "str", "",
        'Logs live here; "" = the platform state dir (Linux: ~/.local/state/biopb).'),
    Key("server", "runtime_dir", "str", "",
        'Kernel connection files and HTTP token files; one that others can enter gets a private '
        'biopb-mcp-<uid> subdir (its own mode is never changed); "" = the platform runtime dir.'),
    Key("server", "log_file", "str", "",
        'Server log file; "" = <state_dir>/server.log.'),
    Key("server", "log_level", "str", "INFO",
        "Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.", choices=LOG_LEVELS),
    Key("server", "trace", "str", "",
        'Write one JSON line per tool call to this file; "" = off (biopb-mcp --trace overrides).'),
    Key("kernel", "name", "str", "",
        'Jupyter kernel spec to run (see `jupyter kernelspec list`); "" = the Python running the server.'),
    Key("kernel", "promote_after", "float", 10.0,
        "Seconds execute_code waits before turning the run into a background job (poll_job).",
        minimum=0.0),
    Key("kernel", "max_output_chars", "int", 20000,
        "Text output kept per call; the rest is cut with a note saying how much.", minimum=1),
    Key("kernel", "max_image_bytes", "int", 1_000_000,
        "Largest PNG returned inline; bigger ones are saved to a file named in the output.",
        minimum=1),
    Key("kernel", "max_images", "int", 10,
        "PNGs returned inline per execution; the rest are saved to files named in the output.",
        minimum=0),
    Key("kernel", "startup_timeout", "float", 60.0,
        "Seconds start_kernel waits for the kernel to become ready.", minimum=0.1),
    Key("kernel", "request_timeout", "float", 30.0,
        "Seconds to wait for a kernel reply (inspect, interrupt) before giving up.", minimum=0.1),
    Key("kernel", "existing", "str", "",
        'Join this kernel instead of starting one: its connection file, a name in Jupyter\'s runtime '
        'dir, or "kernel-*.json" for the newest (biopb-mcp --existing overrides); "" = start our own.'),
    Key("kernel", "existing_plugins", "bool", False,
        "Load the kernel plugins into a joined kernel too (once per attach); false = leave it as it is."),
    Key("docs", "history_keep", "int", 50,
        "Previous versions kept per doc in the hidden history folder.", minimum=1),
    Key("http", "port", "int", 8765,
        "TCP port on 127.0.0.1 (biopb-mcp --port overrides).", minimum=0),
    Key("http", "allowed_hosts", "list[str]", [],
        "Extra Host header values accepted (localhost and 127.0.0.1 always are).", ),
    Key("http", "allowed_origins", "list[str]", [],
        "Extra Origin header values accepted (browser clients).", ),
    Key("http", "auth", "bool", True,
        "Require the per-server bearer token (biopb-mcp --no-auth overrides).", ),
    Key("http", "token", "str", "stable",
        'Bearer token: "stable" (kept 0600 in the state dir, reused; --rotate-token renews it) '
        'or "per-start" (new every start).', choices=("stable", "per-start")),
    Key("record", "enabled", "bool", True,
        "Record the session as a notebook (false = off).", ),
    Key("record", "dir", "str", "",
        'Where the session notebooks go; "" = <state_dir>/notebooks.'),
    Key("record", "max_output_chars", "int", 100_000,
        "Text output kept per notebook cell; the rest is replaced by a note.", minimum=1),
    Key("compute", "scheduler", "str", "none",
        '"none" (dask in the kernel process), "local" (a cluster the kernel starts) or an '
        'address ("tcp://host:8786").'),
    Key("compute", "workers", "int", 0,
        'Local cluster: worker processes; 0 = dask\'s choice (about one per core).', minimum=0),
    Key("compute", "threads_per_worker", "int", 0,
        "Local cluster: threads in each worker; 0 = dask's choice.", minimum=0),
    Key("compute", "memory_limit", "str", "auto",
        'Local cluster: memory per worker, e.g. "4GB" or "512MiB"; "auto" = system memory / workers.'),
    Key("compute", "connect_timeout", "float", 10.0,
        "Seconds dask_client() waits for the scheduler before saying it is unreachable.",
        minimum=0.1),
)
"""Every config key, in file order. The only place a default is written down."""

_BY_DOTTED: dict[str, Key] = {k.dotted: k for k in SCHEMA}

ALIASES: dict[str, str] = {"services.skills_local_dir": "services.docs_local_dir"}
"""Old key -> new key, accepted for one release with a deprecation warning; the new key wins."""

_MAX_PORT = 65535

_MAX_SECONDS = int(threading.TIMEOUT_MAX)
"""Largest float value (every float key is seconds): nan never compares and a bigger timeout
overflows a lock wait, so either would break a tool call instead of bounding it."""


@dataclass(frozen=True)
class KernelSettings:
    """[kernel]: which kernel to run and the bounds on what a call returns."""

    name: str = ""
    promote_after: float = 10.0
    max_output_chars: int = 20000
    max_image_bytes: int = 1_000_000
    max_images: int = 10
    startup_timeout: float = 60.0
    request_timeout: float = 30.0
    existing: str = ""
    existing_plugins: bool = False


@dataclass(frozen=True)
class ComputeSettings:
    """[compute]: where dask computations started in the kernel run."""

    scheduler: str = "none"
    workers: int = 0
    threads_per_worker: int = 0
    memory_limit: str = "auto"
    connect_timeout: float = 10.0


@dataclass(frozen=True)
class DocsSettings:
    """[docs]: docs store limits."""

    history_keep: int = 50


@dataclass(frozen=True)
class HttpSettings:
    """[http]: the streamable HTTP transport."""

    port: int = 8765
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    auth: bool = True
    token: str = "stable"


@dataclass(frozen=True)
class RecordSettings:
    """[record]: the session notebook (``dir`` resolved: never None once loaded)."""

    enabled: bool = True
    dir: Path | None = None
    max_output_chars: int = 100_000


@dataclass(frozen=True)
class ServerSettings:
    """[server]: values that stay as given (the paths are resolved onto Settings)."""

    log_level: str = "INFO"


@dataclass(frozen=True)
class Settings:
    """The merged, validated configuration with every path resolved.

    ``sources`` maps each dotted key to ``"default"``, ``"<file>:<line>"`` or
    ``"alias services.skills_local_dir (<file>:<line>)"``; ``warnings`` holds messages (such as
    deprecations) for whoever sets up logging to log.
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
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


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
    warnings: list[str] = []
    lines: dict[str, int] = {}

    text = _read_text(cfile)
    if text is not None:
        data = _parse(text, cfile)
        lines = _key_lines(text)
        _merge(data, merged, sources, warnings, cfile, lines)

    def path_value(dotted: str) -> Path | None:
        section, name = dotted.split(".")
        raw = merged[section][name]
        if raw == "":
            return None
        return _resolve_path(raw, cdir, cfile, dotted, lines_of(dotted))

    def lines_of(dotted: str) -> int | None:
        src = sources[dotted]
        m = re.search(r":(\d+)\)?$", src)
        return int(m.group(1)) if m else None

    state_dir = path_value("server.state_dir") or Path(platformdirs.user_state_dir(APP_NAME))
    runtime_dir = path_value("server.runtime_dir") or _platform_runtime_dir(warnings)
    k, h = merged["kernel"], merged["http"]
    return Settings(
        config_dir=cdir,
        config_file=cfile,
        docs_local_dir=path_value("services.docs_local_dir") or cdir / "docs",
        state_dir=state_dir,
        runtime_dir=runtime_dir,
        log_file=path_value("server.log_file") or state_dir / "server.log",
        kernel_log_file=state_dir / "kernel.log",
        plugins_dir=cdir / "kernel",
        trace_file=path_value("server.trace"),
        kernel=KernelSettings(
            name=k["name"],
            promote_after=k["promote_after"],
            max_output_chars=k["max_output_chars"],
            max_image_bytes=k["max_image_bytes"],
            max_images=k["max_images"],
            startup_timeout=k["startup_timeout"],
            request_timeout=k["request_timeout"],
            existing=k["existing"],
            existing_plugins=k["existing_plugins"],
        ),
        docs=DocsSettings(history_keep=merged["docs"]["history_keep"]),
        http=HttpSettings(
            port=h["port"],
            allowed_hosts=list(h["allowed_hosts"]),
            allowed_origins=list(h["allowed_origins"]),
            auth=h["auth"],
            token=h["token"],
        ),
        server=ServerSettings(log_level=merged["server"]["log_level"]),
        record=RecordSettings(
            enabled=merged["record"]["enabled"],
            dir=path_value("record.dir") or state_dir / "notebooks",
            max_output_chars=merged["record"]["max_output_chars"],
        ),
        compute=ComputeSettings(**merged["compute"]),
        sources=sources,
        warnings=warnings,
    )


def _platform_runtime_dir(warnings: list[str]) -> Path:
    """platformdirs' runtime dir; its fallback warning (no XDG_RUNTIME_DIR) goes into ``warnings``."""
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        path = Path(platformdirs.user_runtime_dir(APP_NAME))
    warnings.extend(f"{w.message}; runtime files go to {path} (set server.runtime_dir to move them)"
                    for w in caught)
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
            f"the config dir {cfile.parent} is not a directory; "
            f"point ${CONFIG_DIR_ENV} at a directory", path=cfile) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a config file; remove or rename it", path=cfile) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror or exc}", path=cfile) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError("is not UTF-8 text; save it as UTF-8", path=cfile, line=line) from None


def _parse(text: str, cfile: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        key = None
        if line is not None:
            src = text.splitlines()[line - 1] if line <= len(text.splitlines()) else ""
            km = re.match(r"\s*([A-Za-z0-9_.\-\"' ]+?)\s*=", src)
            key = km.group(1).strip() if km else None
        what = f" (key {key})" if key else ""
        raise ConfigError(f"invalid TOML{what}: {reason}; fix that line", path=cfile, line=line,
                          key=key) from None


_HEADER = re.compile(r"^\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")  # [table] or [[array]]
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=")


def _key_lines(text: str) -> dict[str, int]:
    """Map dotted keys (and section names) to the line defining them (best effort, first wins)."""
    found: dict[str, int] = {}
    section = ""
    for no, line in enumerate(text.splitlines(), start=1):
        hm = _HEADER.match(line)
        if hm:
            section = _unquote_dotted(hm.group(1))
            found.setdefault(section, no)
            continue
        am = _ASSIGN.match(line)
        if am:
            key = _unquote_dotted(am.group(1))
            full = f"{section}.{key}" if section else key
            found.setdefault(full, no)
            # a top-level `kernel.name = ...` or `kernel = {...}` also locates its section
            found.setdefault(full.split(".")[0], no)
    return found


def _unquote_dotted(raw: str) -> str:
    parts = [p.strip().strip("\"'") for p in raw.split(".")]
    return ".".join(parts)


def _merge(
    data: dict[str, Any],
    merged: dict[str, dict[str, Any]],
    sources: dict[str, str],
    warnings: list[str],
    cfile: Path,
    lines: dict[str, int],
) -> None:
    """Deep-merge the file over the defaults: a partial section overrides only its own keys."""
    alias_values: dict[str, tuple[str, Any]] = {}
    for section, body in data.items():
        if section not in SECTIONS:
            hint = _closest(section, SECTIONS)
            raise ConfigError(
                f"unknown section [{section}]{hint}; known sections: {', '.join(SECTIONS)}",
                path=cfile, line=lines.get(section), key=section)
        if not isinstance(body, dict):
            raise ConfigError(
                f"{section} must be a table ([{section}] with keys under it), got {_describe(body)}",
                path=cfile, line=lines.get(section), key=section)
        for name, value in body.items():
            dotted = f"{section}.{name}"
            line = lines.get(dotted, lines.get(section))  # inside `kernel = {...}`: the table's line
            if dotted in ALIASES:
                alias_values[dotted] = (_where(cfile, line), value)
                _check_type(_BY_DOTTED[ALIASES[dotted]], value, cfile, line, shown=dotted)
                continue
            key = _BY_DOTTED.get(dotted)
            if key is None:
                known = [k.name for k in SCHEMA if k.section == section]
                hint = _closest(name, known)
                raise ConfigError(
                    f"unknown key {dotted}{hint}; keys in [{section}]: {', '.join(known)}",
                    path=cfile, line=line, key=dotted)
            merged[section][name] = _check_type(key, value, cfile, line)
            sources[dotted] = _where(cfile, line)
    for old, (where, value) in alias_values.items():
        new = ALIASES[old]
        if sources[new] == "default":
            section, name = new.split(".")
            merged[section][name] = value
            sources[new] = f"alias {old} ({where})"
            warnings.append(
                f"{where}: {old} is deprecated and will stop working in the next release; "
                f"rename it to {new.split('.')[1]} (same value)")
        else:
            warnings.append(
                f"{where}: {old} is deprecated and ignored because {new} is also set "
                f"({sources[new]}); delete the {old} line")


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
        example = tomli_w.dumps({key.name: key.default}).strip()
        raise ConfigError(
            f"{dotted} must be {_TYPE_NAMES[key.type]}, got {_describe(value)}; e.g. {example}",
            path=cfile, line=line, key=dotted)
    if key.type == "float" and not (math.isfinite(value) and value <= _MAX_SECONDS):
        raise ConfigError(
            f"{dotted} must be a finite number no larger than {_MAX_SECONDS}, got {value!r}",
            path=cfile, line=line, key=dotted)
    if key.choices and value not in key.choices:
        raise ConfigError(
            f"{dotted} must be one of {', '.join(key.choices)}, got {value!r}",
            path=cfile, line=line, key=dotted)
    if key.minimum is not None and value < key.minimum:
        raise ConfigError(f"{dotted} must be at least {key.minimum:g}, got {value!r}",
                          path=cfile, line=line, key=dotted)
    if key.dotted == "http.port" and value > _MAX_PORT:
        raise ConfigError(f"{dotted} must be at most {_MAX_PORT}, got {value!r}",
                          path=cfile, line=line, key=dotted)
    if key.section == "compute" and key.type == "str":
        _check_compute(key, value, cfile, line)
    if key.type == "str" and "\x00" in value:
        raise ConfigError(f"{dotted} must not contain a NUL character", path=cfile, line=line,
                          key=dotted)
    return value


_SCHEDULER_ADDRESS = re.compile(r"(tcp|tls|ws|wss|inproc|ucx)://\S+")
_MEMORY = re.compile(r"(auto|\d+(\.\d+)?\s*([kKMGT]i?B|[kKMGT]|B)?)")


def _check_compute(key: Key, value: str, cfile: Path, line: int | None) -> None:
    """Refuse what dask would only reject at first use, inside the kernel, far from this file."""
    if key.name == "scheduler" and value not in ("none", "local") and not _SCHEDULER_ADDRESS.fullmatch(value):
        raise ConfigError(
            f'compute.scheduler must be "none", "local" or a scheduler address such as '
            f'"tcp://host:8786", got {value!r}', path=cfile, line=line, key=key.dotted)
    if key.name == "memory_limit" and not _MEMORY.fullmatch(value.strip()):
        raise ConfigError(
            f'compute.memory_limit must be "auto" or a size such as "4GB" or "512MiB", got {value!r}',
            path=cfile, line=line, key=key.dotted)


def _describe(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a table"}
    kind = next((v for t, v in kinds.items() if isinstance(value, t)), type(value).__name__)
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{kind} ({shown})"


def _closest(word: str, options: Any) -> str:
    match = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {match[0]}?)" if match else ""


def _where(cfile: Path, line: int | None) -> str:
    return f"{cfile}:{line}" if line is not None else str(cfile)


def _resolve_path(raw: str, cdir: Path, cfile: Path, dotted: str, line: int | None) -> Path:
    """``~`` expanded; a relative path is taken relative to the config dir."""
    try:
        p = Path(raw).expanduser()
    except RuntimeError as exc:  # "~user" for an unknown user
        raise ConfigError(f"{dotted}: cannot expand {raw!r}: {exc}", path=cfile, line=line,
                          key=dotted) from None
    return p if p.is_absolute() else cdir / p


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


def render_example() -> str:
    """The commented config file with every default: ``config.example.toml`` and ``config init``."""
    parts = [_EXAMPLE_HEAD]
    for section, about in SECTIONS.items():
        parts.append(f"\n# {about}\n[{section}]\n")
        for key in (k for k in SCHEMA if k.section == section):
            # The value line is a comment too: `config show` then attributes every key the user
            # has not uncommented to its default, not to this file.
            parts.append(f"# {key.doc}\n# {tomli_w.dumps({key.name: key.default})}")
    return "".join(parts)


def init_config(cdir: Path, *, force: bool = False) -> Path:
    """Write the commented default config file into ``cdir``; returns its path.

    Raises:
        ConfigError: the file exists and ``force`` is false, or the dir/file cannot be written.
    """
    cfile = cdir / CONFIG_FILE_NAME
    if not force and (cfile.exists() or cfile.is_symlink()):
        raise ConfigError("already exists; edit it, or rerun with --force to overwrite it with "
                          "the defaults", path=cfile)
    tmp = cfile.with_name(f".{CONFIG_FILE_NAME}.tmp{os.getpid()}")
    try:
        cdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.write_text(render_example(), encoding="utf-8")
        os.replace(tmp, cfile)
    except OSError as exc:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        raise ConfigError(
            f"cannot write the config file: {exc.strerror or exc}; set ${CONFIG_DIR_ENV} "
            f"to a writable directory", path=cfile) from None
    return cfile


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
            line = tomli_w.dumps({key.name: values[key.dotted]}).strip()
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
    """Dotted key -> the value in effect, as written in TOML (paths as given, not resolved)."""
    values: dict[str, Any] = {}
    sub = {"kernel": settings.kernel, "docs": settings.docs, "http": settings.http,
           "server": settings.server, "record": settings.record, "compute": settings.compute}
    path_fields: dict[str, Path | None] = {
        "services.docs_local_dir": settings.docs_local_dir,
        "server.state_dir": settings.state_dir,
        "server.runtime_dir": settings.runtime_dir,
        "server.log_file": settings.log_file,
        "server.trace": settings.trace_file,
        "record.dir": settings.record.dir,
    }
    for key in SCHEMA:
        if key.dotted in path_fields:
            value = path_fields[key.dotted]
            from_default = settings.sources.get(key.dotted, "default") == "default"
            values[key.dotted] = "" if (from_default or value is None) else str(value)
        else:
            values[key.dotted] = getattr(sub[key.section], key.name)
    return values
