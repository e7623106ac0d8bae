"""Concurrent writers: two real server processes and a hand editor on one local tier.

One round, at once: whole-body writes of one shared doc from both servers, creates from both
(each appends to the index), the same old/new edit of the index and of a doc from both, and a
thread editing the shared doc by hand, in place, as an editor without atomic save would.
Afterwards: no torn file, every server write is the final text or in history, the losing old/new
was refused and left no trace, every create has its one index line. The reliability test runs one
round; the soak runs rounds for minutes on the same two servers, each round on its own doc ids.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from biopb_mcp.docs.store import DocStore
from biopb_mcp.text.doc_views import read_doc

__all__ = ["Round", "RoundResult", "history_texts", "prepare_round", "retire_round", "run_round", "shared_body"]

PADDING = "".join(f"line {i} of padding so a write is more than one block\n" for i in range(150))
VERSION_LINE = re.compile(r"^- v(\d+)")


def shared_body(tag: str, who: str, i: int) -> str:
    return f"# shared\n\nwritten by {who} #{i} in {tag}\n\n{PADDING}"


def history_texts(store: Any, doc_id: str) -> list[str]:
    """Every kept version's text of ``doc_id``, read through the store's public views."""
    listing = read_doc(store, f"{doc_id}@history")
    texts = []
    for line in listing.splitlines():
        match = VERSION_LINE.match(line)
        if match:
            view = read_doc(store, f"{doc_id}@v{match.group(1)}")
            texts.append(view.split("\n\n", 1)[1])
    return texts


@dataclass
class Round:
    """The doc ids and sizes of one round (``tag`` keeps rounds apart on a long-lived tier)."""

    tag: str
    body_writes: int = 10
    creates: int = 8
    hand_edits: int = 10

    @property
    def shared(self) -> str:
        return f"shared-{self.tag}"

    @property
    def race_doc(self) -> str:
        return f"race-doc-{self.tag}"

    @property
    def race_target(self) -> str:
        return f"- race-target-{self.tag}: "


@dataclass
class RoundResult:
    """What one round did and what it found: ``problems`` holds (kind, what), none expected."""

    calls: int = 0
    hand_edits: int = 0
    tally: Counter[str] = field(default_factory=Counter)
    problems: list[tuple[str, str]] = field(default_factory=list)


def prepare_round(store: DocStore, r: Round) -> None:
    """The docs the round races on, written through the store before the servers start."""
    store.write_doc(r.race_doc, body="# race doc\n\nstep: original\n")
    store.write_doc(r.shared, body=shared_body(r.tag, "setup", 0))
    store.write_doc("index", old=f"- {r.race_doc}:", new=f"{r.race_target}original hook\n- {r.race_doc}:")


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in getattr(result, "content", []))


async def run_round(clients: dict[str, Any], local: Path, r: Round, *, history_keep: int) -> RoundResult:
    """Both servers' calls at once (3 in flight each) with the hand editor beside them; then the checks."""
    results: list[tuple[str, dict[str, str], bool, str]] = []
    hand_texts: list[str] = []
    superseded_by_hand: list[str] = []  # a hand edit the editor itself replaced before any server saw it
    stop = threading.Event()
    path = local / f"{r.shared}.md"

    def hand_editor() -> None:
        rng = random.Random(r.tag)
        for k in range(r.hand_edits):
            if stop.is_set():
                return
            if hand_texts and path.read_text() == hand_texts[-1]:
                superseded_by_hand.append(hand_texts[-1])
            text = f"# shared\n\nhand edit #{k} in {r.tag}\n\n{PADDING}"
            hand_texts.append(text)
            path.write_text(text)  # in place, like an editor without atomic save
            time.sleep(rng.uniform(0.01, 0.1))

    async def one_server(who: str, client: Any) -> None:
        ops: list[tuple[str, dict[str, str]]] = []
        ops += [("write_doc", {"id": r.shared, "body": shared_body(r.tag, who, i)}) for i in range(r.body_writes)]
        ops += [
            (
                "write_doc",
                {"id": f"new-{r.tag}-{who}-{i}", "body": f"# New {who} {i}\n\nCreated by server {who}, #{i}.\n"},
            )
            for i in range(r.creates)
        ]
        ops += [
            (
                "write_doc",
                {"id": "index", "old": f"{r.race_target}original hook", "new": f"{r.race_target}hook from {who}"},
            ),
            ("write_doc", {"id": r.race_doc, "old": "step: original", "new": f"step: from {who}"}),
        ]
        random.Random(f"{r.tag}-{who}").shuffle(ops)
        limiter = anyio.CapacityLimiter(3)

        async def call(name: str, args: dict[str, str]) -> None:
            async with limiter:
                result = await client.call_tool(name, args)
            results.append((name, args, bool(result.is_error), _text(result)))

        async with anyio.create_task_group() as tg:
            for name, args in ops:
                tg.start_soon(call, name, args)

    editor = threading.Thread(target=hand_editor, daemon=True)
    try:
        editor.start()
        async with anyio.create_task_group() as tg:
            for who, client in clients.items():
                tg.start_soon(one_server, who, client)
        await anyio.to_thread.run_sync(editor.join, 60)  # every hand edit gets made
    finally:
        stop.set()
        if editor.is_alive():
            await anyio.to_thread.run_sync(editor.join, 30)
    out = RoundResult(calls=len(results), hand_edits=len(hand_texts))
    _check(out, results, hand_texts, superseded_by_hand, local, r, history_keep)
    return out


def _check(
    out: RoundResult,
    done: list[tuple[str, dict[str, str], bool, str]],
    hand_texts: list[str],
    superseded_by_hand: list[str],
    local: Path,
    r: Round,
    history_keep: int,
) -> None:
    problems = out.problems
    fresh = DocStore(local, history_keep=history_keep)

    # Creates: all succeeded, each doc holds its body, each has exactly one index line.
    index_file = (local / "index.md").read_text()
    for _name, args, is_error, text in done:
        if args["id"].startswith("new-"):
            if is_error:
                problems.append(("lost", f"create of {args['id']} failed: {text[:200]}"))
            elif fresh.doc_text(args["id"])[0] != args["body"]:
                problems.append(("torn", f"{args['id']} does not hold the body written"))
            if index_file.count(f"- {args['id']}:") != 1:
                problems.append(("lost", f"index line of {args['id']} lost or doubled"))

    # The same old/new from both servers: exactly one wins, the other is refused and left no trace.
    for doc_id, marker in (("index", r.race_target), (r.race_doc, "step: ")):
        attempts = [
            (is_error, text, args) for _n, args, is_error, text in done if args["id"] == doc_id and "old" in args
        ]
        winners = [a for a in attempts if not a[0]]
        losers = [a for a in attempts if a[0]]
        if len(winners) != 1 or len(losers) != len(attempts) - 1:
            problems.append(("race", f"old/new on {doc_id}: {len(winners)} winners of {len(attempts)}"))
            continue
        for _e, text, _a in losers:
            if "0 matches" not in text or "nothing was changed" not in text:
                problems.append(("race", f"old/new loser on {doc_id} refused unclearly: {text[:200]}"))
        current = index_file if doc_id == "index" else fresh.doc_text(doc_id)[0]
        if winners[0][2]["new"] not in current or any(loser[2]["new"] in current for loser in losers):
            problems.append(("lost", f"old/new on {doc_id}: the winner is not what the doc holds"))
        if sum(line.startswith(marker) for line in current.splitlines()) != 1:
            problems.append(("torn", f"old/new on {doc_id}: the edited line is not there exactly once"))

    # Body writes of one doc: no torn file, and nothing a server wrote is lost without a trace.
    final = (local / f"{r.shared}.md").read_text()
    server_bodies = [args["body"] for _n, args, _e, _t in done if args["id"] == r.shared]
    for _n, args, is_error, text in done:
        if args["id"] == r.shared and is_error:
            problems.append(("lost", f"a body write of {r.shared} failed: {text[:200]}"))
    if final not in server_bodies + hand_texts + [shared_body(r.tag, "setup", 0)]:
        problems.append(("torn", f"{r.shared}.md is torn"))
    kept = history_texts(fresh, r.shared)
    lost = [b for b in server_bodies if b != final and b not in kept]
    problems += [("lost", f"a server write of {r.shared} is neither the final text nor in history")] * len(lost)
    out.tally["hand edits traced (final or in history)"] += sum(1 for h in hand_texts if h == final or h in kept)
    out.tally["hand edits replaced by the next hand edit"] += len(superseded_by_hand)
    out.tally["hand edits overwritten by a server untraced"] += len(
        [h for h in hand_texts if h != final and h not in kept and h not in superseded_by_hand]
    )

    # Every doc of the round is whole: one of the texts somebody wrote.
    known = set(server_bodies + hand_texts + [shared_body(r.tag, "setup", 0)])
    known |= {a["body"] for _n, a, _e, _t in done if "body" in a}
    for doc_id in fresh.shelf.doc_ids():
        if r.tag not in doc_id or not (local / f"{doc_id}.md").exists():
            continue
        text = fresh.doc_text(doc_id)[0]
        if doc_id == r.race_doc:
            if text not in {f"# race doc\n\nstep: {w}\n" for w in ("original", "from A", "from B")}:
                problems.append(("torn", f"{doc_id} holds a text nobody wrote"))
        elif text not in known:
            problems.append(("torn", f"{doc_id} holds a text nobody wrote"))
    if list(local.glob("**/.*.tmp")):
        problems.append(("surfaced", "temp files left behind by clean writes"))


def retire_round(store: DocStore, r: Round) -> None:
    """Take the round's lines out of the index (one write), so rounds can go on under the entry cap.

    Runs between rounds, when neither server writes; the docs themselves stay, unlisted.
    """
    text = (store.local_dir / "index.md").read_text()
    marks = (f"- new-{r.tag}-", f"- {r.race_doc}:", f"- {r.shared}:", r.race_target)
    kept = [line for line in text.splitlines(keepends=True) if not line.startswith(marks)]
    store.write_doc("index", body="".join(kept))
