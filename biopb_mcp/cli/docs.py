"""``biopb-mcp docs …``: the docs store from a terminal (index, read, check, search, pack), read-only
but for ``restore``, which puts a kept version back through the store's ordinary write."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from biopb_mcp.cli.usage import print_text, print_warnings
from biopb_mcp.config.settings import load_settings

if TYPE_CHECKING:
    from biopb_mcp.docs.store import DocStore

__all__ = ["run_docs"]


class _WarningLine(logging.Formatter):
    """A store warning as a terminal line: a doc file it could not read is said with what to do
    about it (the log record holds the error, which states only what is wrong)."""

    def format(self, record: logging.LogRecord) -> str:
        from biopb_mcp.errors import DocUnreadable
        from biopb_mcp.text.unreadable import unreadable_text

        if isinstance(record.args, tuple) and any(isinstance(a, DocUnreadable) for a in record.args):
            said = tuple(unreadable_text(a) if isinstance(a, DocUnreadable) else a for a in record.args)
            record = logging.makeLogRecord({**record.__dict__, "args": said, "message": None})
        return super().format(record)


def run_docs(args: argparse.Namespace) -> int:
    settings = load_settings()
    print_warnings(settings, config_file_only=True)  # the runtime-dir fallback is serve's business
    from biopb_mcp.docs.store import DocStore  # imported here: --help stays fast

    store = DocStore(
        settings.docs_local_dir,
        history_keep=settings.docs.history_keep,
        read_only=args.docs_command != "restore",
        withhold=settings.docs.withhold,
    )
    # the store logs skipped files (unreadable, bad frontmatter): show them as warning lines
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_WarningLine("warning: %(message)s"))
    handler.setLevel(logging.WARNING)
    docs_logger = logging.getLogger("biopb_mcp.docs")
    docs_logger.addHandler(handler)
    try:
        return _docs_command(args, store)
    finally:
        docs_logger.removeHandler(handler)


def _docs_command(args: argparse.Namespace, store: DocStore) -> int:
    from biopb_mcp.text.doc_views import read_doc
    from biopb_mcp.text.index import render_index

    cmd = args.docs_command
    if cmd == "index":
        print_text(render_index(store))
    elif cmd == "read":
        from biopb_mcp.text.docs import FOR_TERMINAL

        print_text(read_doc(store, args.id, FOR_TERMINAL))
    elif cmd == "check":
        from biopb_mcp.text.lint import finding_text

        problems = store.check()
        warnings = store.check_warnings()
        for problem in problems:
            print(finding_text(problem))
        for warning in warnings:
            print(f"warning: {finding_text(warning)}")
        if problems:
            print(f"{len(problems)} problem(s) found in {store.shipped_dir} and {store.local_dir}", file=sys.stderr)
            return 1
        also = f"; {len(warnings)} warning(s) above" if warnings else ""
        print(f"ok: {len(store.doc_ids())} docs, no problems{also}")
    elif cmd == "search":
        from biopb_mcp.text.docs import FOR_TERMINAL, format_hits

        hits = store.search_docs(args.query, max_results=args.max)
        print_text(format_hits(hits, args.query, FOR_TERMINAL))
    elif cmd == "restore":
        from biopb_mcp.text.docs import FOR_TERMINAL, write_report

        result = store.restore(args.id, args.version)
        if result.changed:
            print(f"Restored {args.id!r} to v{args.version}.")
        print_text(write_report(result, FOR_TERMINAL))
    else:  # pack
        from biopb_mcp.text.pack import build_pack

        text = build_pack(store)
        if args.out is None:
            print_text(text)
        else:
            args.out.write_text(text, encoding="utf-8")
            print(f"wrote {args.out} ({len(text.splitlines())} lines)")
    return 0
