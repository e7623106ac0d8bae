"""The ``biopb-mcp`` command: serve (the default), ``docs …`` over the store, ``config …``.

Exit codes: 0 ok, 1 ``docs check`` found problems, 2 bad usage, bad config or any other error
(one ``error: …`` line on stderr, never a traceback). Heavy imports (the server, the docs store)
happen inside the command that needs them so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import biopb_mcp
from biopb_mcp.cli.config import run_config
from biopb_mcp.cli.docs import run_docs
from biopb_mcp.cli.serve import TTY_HINT, run_serve
from biopb_mcp.cli.usage import UsageError
from biopb_mcp.config.settings import load_settings
from biopb_mcp.errors import BiopbMcpError
from biopb_mcp.text.install import install_command

__all__ = ["TTY_HINT", "main"]

logger = logging.getLogger(__name__)

DEBUG_ENV = "BIOPB_DEBUG"
"""Set to 1 to get the traceback of an unexpected error instead of the one-line message."""

_MAIN_EPILOG = """\
examples:
  biopb-mcp demo                          see it work end to end (temporary config, a few seconds)
  biopb-mcp                               serve over stdio (what an MCP client launches)
  biopb-mcp --transport http --port 8765  serve streamable HTTP on 127.0.0.1 with a bearer token
  biopb-mcp --existing kernel-1234.json   join a notebook's kernel (%load_ext biopb_mcp prints this)
  biopb-mcp docs index                    the doc index the agent sees
  biopb-mcp docs check                    lint the docs after editing them by hand
  biopb-mcp config init                   write a commented config.toml with every default
  biopb-mcp config show                   the merged config and where each value came from
  biopb-mcp console                       watch the agent's kernel live and type into it

Without a command, biopb-mcp serves: `biopb-mcp --transport http` = `biopb-mcp serve --transport http`.
The config dir is $BIOPB_CONFIG_DIR, else the platform one (Linux: ~/.config/biopb).
"""


EXISTING_NEWEST = "kernel-*.json"
"""What ``--existing`` without a file means: jupyter-client's pattern for the newest kernel."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become one ``error: …`` line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


def _build_parser() -> _Parser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="biopb-mcp",
        description="MCP server for imaging scientists: one IPython kernel the agent drives, "
        "and an agent-edited docs store whose index is inlined into the MCP handshake.",
        epilog=_MAIN_EPILOG,
        formatter_class=fmt,
    )
    parser.add_argument("--version", action="version", version=f"biopb-mcp {biopb_mcp.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{serve,docs,config,console,demo}")

    serve = sub.add_parser(
        "serve",
        help="serve MCP (the default command)",
        formatter_class=fmt,
        description="Serve MCP over stdio (default) or streamable HTTP on 127.0.0.1.",
        epilog="examples:\n"
        "  biopb-mcp serve\n"
        "  biopb-mcp --transport http --port 9000\n"
        "  biopb-mcp --transport http --no-auth      # no bearer token: any local user can connect\n"
        "  biopb-mcp --trace /tmp/calls.jsonl         # one JSON line per tool call\n"
        "  biopb-mcp --existing                       # join the newest notebook kernel\n",
    )
    serve.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default; what MCP clients launch) or http (streamable HTTP)",
    )
    serve.add_argument(
        "--port", type=_port, default=None, help="HTTP port on 127.0.0.1 (default: http.port in the config, 8765)"
    )
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="HTTP without the bearer token (every local user can then run code as you)",
    )
    serve.add_argument(
        "--rotate-token",
        action="store_true",
        help="HTTP: replace the stable bearer token with a new one (clients must update)",
    )
    serve.add_argument(
        "--existing",
        nargs="?",
        const=EXISTING_NEWEST,
        default=None,
        metavar="FILE",
        help="join an existing Jupyter kernel (a notebook's) instead of starting one: "
        "its connection file, or a name looked up in Jupyter's runtime dir; no FILE = "
        "the newest kernel there (as `jupyter console --existing`)",
    )
    serve.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="FILE",
        help="append one JSON line per tool call to FILE; a relative FILE is under "
        "the config dir, as in the config file (default: server.trace)",
    )

    docs = sub.add_parser(
        "docs",
        help="read and check the docs store",
        formatter_class=fmt,
        description="The same docs the agent reads and writes: shipped tier plus your local tier.",
        epilog="examples:\n"
        "  biopb-mcp docs index\n"
        "  biopb-mcp docs read authoring\n"
        "  biopb-mcp docs read segment-nuclei@diff\n"
        "  biopb-mcp docs check\n"
        "  biopb-mcp docs search 'otsu threshold' --max 3\n"
        "  biopb-mcp docs pack --out docs-pack.md\n"
        "  biopb-mcp docs restore segment-nuclei v3\n",
    )
    dsub = docs.add_subparsers(dest="docs_command", metavar="{index,read,check,search,pack,restore}", required=True)
    dsub.add_parser(
        "index",
        help="print the rendered index (what the agent sees at start)",
        description="Print the rendered doc index. Example: biopb-mcp docs index",
    )
    read = dsub.add_parser(
        "read", help="print one doc by id", description="Print one doc. Example: biopb-mcp docs read authoring"
    )
    read.add_argument("id", help="doc id, or index, <id>@diff, <id>@history, <id>@v<N>")
    dsub.add_parser(
        "check",
        help="lint both tiers; exit 1 and list each problem if any",
        description="Lint ids, caps, index entries that do not resolve and shipped "
        "[[links]] that do not land. Example: biopb-mcp docs check",
    )
    search = dsub.add_parser(
        "search",
        help="full-text search over the docs the index lists",
        description="Example: biopb-mcp docs search 'otsu threshold' --max 3",
    )
    search.add_argument("query", help="words or an exact phrase to find")
    search.add_argument("--max", type=_positive_int, default=5, metavar="N", help="at most N hits (default 5)")
    pack = dsub.add_parser(
        "pack",
        help="every doc concatenated into one markdown file",
        description="Example: biopb-mcp docs pack --out docs-pack.md",
    )
    pack.add_argument("--out", type=Path, default=None, metavar="FILE", help="write to FILE instead of stdout")
    restore = dsub.add_parser(
        "restore",
        help="put a kept version of a local doc back (the replaced text is kept as a version too)",
        description="Write version N of a doc (see biopb-mcp docs read <id>@history) back as its "
        "text, through the same write the agent's write_doc makes. Example: biopb-mcp docs restore segment-nuclei v3",
    )
    restore.add_argument("id", help="doc id, as the index lists it")
    restore.add_argument("version", type=_version, metavar="v<N>", help="the version to restore, e.g. v3")

    config = sub.add_parser(
        "config",
        help="write or show the config file",
        formatter_class=fmt,
        description="The config file is <config dir>/config.toml; a missing key keeps its default.",
        epilog="examples:\n"
        "  biopb-mcp config init            # write config.toml with every default, commented\n"
        "  biopb-mcp config init --force    # overwrite an existing one\n"
        "  biopb-mcp config show            # merged values and where each came from\n",
    )
    csub = config.add_subparsers(dest="config_command", metavar="{init,show}", required=True)
    init = csub.add_parser(
        "init", help="write a commented config.toml with every default", description="Example: biopb-mcp config init"
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing config.toml")
    csub.add_parser(
        "show",
        help="print the merged config and where each value came from",
        description="Example: biopb-mcp config show",
    )
    _add_console_parser(sub, fmt)
    demo = sub.add_parser(
        "demo",
        help="run the real server end to end in a temporary config tree",
        formatter_class=fmt,
        description="Start the server over stdio with the MCP SDK's client, in a temporary config "
        "tree (your own config and docs are not used), and walk through what an agent does: the "
        "doc index in the handshake, start_kernel, an analysis with an image back, read_doc, "
        "write_doc, search_docs, server_status. Exit 0 when every step passed, 1 naming the "
        "step that failed.",
        epilog="examples:\n  biopb-mcp demo\n  biopb-mcp demo --image ./nuclei.png\n",
    )
    demo.add_argument(
        "--image",
        type=Path,
        default=None,
        metavar="FILE",
        help="save the image the kernel returns to FILE and keep it (default: into the temporary tree, removed with it)",
    )
    return parser


def _add_console_parser(sub: argparse._SubParsersAction[_Parser], fmt: type[argparse.HelpFormatter]) -> None:
    console = sub.add_parser(
        "console",
        help="a terminal console on the running server's kernel (shared with the agent)",
        formatter_class=fmt,
        description="Attach a terminal console to the kernel of the running biopb-mcp server: the "
        "agent's code and outputs show up live, marked [agent], and what you type runs in the same "
        "namespace. Leaving the console (exit, quit, Ctrl-D) leaves the kernel running. Needs the "
        f"console extra: {install_command('console')}.",
        epilog="examples:\n"
        "  biopb-mcp console            # the newest running server's kernel\n"
        "  biopb-mcp console --pid 4242 # the kernel of server pid 4242 (server_status shows it)\n",
    )
    console.add_argument(
        "--pid",
        type=_positive_int,
        default=None,
        metavar="N",
        help="attach to the kernel of the server with this pid (default: the newest)",
    )


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port must be an integer, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {value}")
    return value


def _version(text: str) -> int:
    """``v3`` (as @history lists it) or ``3``."""
    digits = text[1:] if text[:1] in ("v", "V") else text
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"expected a version as @history lists it, v<N> (e.g. v3), got {text!r}")
    return int(digits)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _with_default_command(argv: list[str]) -> list[str]:
    """Insert ``serve`` when no command is named (bare ``biopb-mcp`` or serve options only)."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        return ["serve", *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    try:
        try:
            args = parser.parse_args(_with_default_command(args_list))
        except SystemExit as exc:  # --help / --version
            return exc.code if isinstance(exc.code, int) else 0
        return _dispatch(args)
    except UsageError as exc:
        return _fail(str(exc))
    except BiopbMcpError as exc:
        from biopb_mcp.text.failures import for_terminal

        return _fail(for_terminal(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}")
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the top-level handler: never a traceback for the user
        if os.environ.get(DEBUG_ENV):
            raise
        if logging.getLogger().handlers:
            logger.exception("Unexpected error")
        return _fail(f"unexpected {type(exc).__name__}: {exc} (rerun with {DEBUG_ENV}=1 for the traceback)")


def _fail(message: str) -> int:
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"error: {one_line}", file=sys.stderr)
    return 2


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in (None, "serve"):
        return run_serve(args)
    if args.command == "config":
        return run_config(args)
    if args.command == "console":
        return _console(args)
    if args.command == "demo":
        from biopb_mcp.server.demo import run_demo

        return run_demo(sys.stdout, args.image)
    return run_docs(args)


def _console(args: argparse.Namespace) -> int:
    settings = load_settings()
    from biopb_mcp.cli.console import run

    return run(
        Path(settings.runtime_dir), args.pid, lambda text: print(text, flush=True), config_dir=settings.config_dir
    )
