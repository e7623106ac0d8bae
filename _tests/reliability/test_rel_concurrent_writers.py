"""Concurrent writers: two real server processes and a hand editor, one local tier.

Both servers are ``python -m biopb_mcp`` over stdio (one per agent host is the normal way two
processes share a tier). At once: whole-body writes of the same doc from both, creates from both
(each appends to the index), the same old/new edit of the index and of a doc from both, and a
thread editing the shared doc by hand, in place, as an editor would. Afterwards: no torn file,
every server write is the final text or in history, the losing old/new was refused and left no
trace, every create has its one index line.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from _tests.support.rel_helpers import history_texts, stdio_params, write_config
from biopb_mcp.docs.store import DocStore

pytestmark = pytest.mark.anyio

BODY_WRITES = 10
CREATES = 8
HAND_EDITS = 10
PADDING = "".join(f"line {i} of padding so a write is more than one block\n" for i in range(150))


def _text(result: object) -> str:
    return "\n".join(b.text for b in getattr(result, "content", []) if isinstance(b, TextContent))


def shared_body(who: str, i: int) -> str:
    return f"# shared\n\nwritten by {who} #{i}\n\n{PADDING}"


async def test_two_servers_and_a_hand_editor(tmp_path: Path, counts: Counter[str]) -> None:
    env = write_config(tmp_path, "[docs]\nhistory_keep = 1000\n")
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    store = DocStore(local, history_keep=1000)
    index_text = store.read_doc("index@diff")  # seeds the local index
    assert index_text
    store.write_doc("race-doc", body="# race doc\n\nstep: original\n")
    store.write_doc("shared", body=shared_body("setup", 0))
    store.write_doc("index", old="- race-doc:", new="- race-target: original hook\n- race-doc:")

    results: dict[str, list[tuple[str, dict[str, str], bool, str]]] = {"A": [], "B": []}
    hand_texts: list[str] = []
    superseded_by_hand: list[str] = []  # a hand edit the editor itself replaced before any server saw it
    stop = threading.Event()

    def hand_editor() -> None:
        rng = random.Random(7)
        path = local / "shared.md"
        for k in range(HAND_EDITS):
            if stop.is_set():
                return
            if hand_texts and path.read_text() == hand_texts[-1]:
                superseded_by_hand.append(hand_texts[-1])
            text = f"# shared\n\nhand edit #{k}\n\n{PADDING}"
            hand_texts.append(text)
            path.write_text(text)  # in place, like an editor without atomic save
            time.sleep(rng.uniform(0.01, 0.1))

    async def one_server(who: str, ready: anyio.Event, go: anyio.Event) -> None:
        ops: list[tuple[str, dict[str, str]]] = []
        ops += [("write_doc", {"id": "shared", "body": shared_body(who, i)}) for i in range(BODY_WRITES)]
        ops += [("write_doc", {"id": f"new-{who}-{i}", "body": f"# New {who} {i}\n\nCreated by server {who}, #{i}.\n"})
                for i in range(CREATES)]
        ops += [("write_doc", {"id": "index", "old": "- race-target: original hook", "new": f"- race-target: hook from {who}"}),
                ("write_doc", {"id": "race-doc", "old": "step: original", "new": f"step: from {who}"})]
        random.Random(who).shuffle(ops)
        async with Client(stdio_params(env), mode="legacy" if who == "A" else "auto", read_timeout_seconds=60) as client:
            ready.set()
            await go.wait()
            limiter = anyio.CapacityLimiter(3)

            async def call(name: str, args: dict[str, str]) -> None:
                async with limiter:
                    result = await client.call_tool(name, args)
                results[who].append((name, args, bool(result.is_error), _text(result)))

            async with anyio.create_task_group() as tg:
                for name, args in ops:
                    tg.start_soon(call, name, args)

    with anyio.fail_after(150):
        ready_a, ready_b, go = anyio.Event(), anyio.Event(), anyio.Event()
        editor = threading.Thread(target=hand_editor, daemon=True)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(one_server, "A", ready_a, go)
                tg.start_soon(one_server, "B", ready_b, go)
                await ready_a.wait()
                await ready_b.wait()
                editor.start()
                go.set()
            await anyio.to_thread.run_sync(editor.join, 60)  # every hand edit gets made
        finally:
            stop.set()
            if editor.is_alive():
                await anyio.to_thread.run_sync(editor.join, 30)

    done = results["A"] + results["B"]
    assert len(done) == 2 * (BODY_WRITES + CREATES + 2)
    fresh = DocStore(local, history_keep=1000)

    # Creates: all succeeded, each doc holds its body, each has exactly one index line.
    index_file = (local / "index.md").read_text()
    for _name, args, is_error, text in done:
        if args["id"].startswith("new-"):
            assert not is_error, text
            assert fresh.doc_text(args["id"])[0] == args["body"]
            assert index_file.count(f"- {args['id']}:") == 1, f"index line of {args['id']} lost or doubled"

    # The same old/new from both servers: exactly one wins, the other is refused and left no trace.
    for doc_id, marker in (("index", "- race-target: "), ("race-doc", "step: ")):
        attempts = [(is_error, text, args) for _n, args, is_error, text in done if args["id"] == doc_id and "old" in args]
        assert len(attempts) == 2
        winners = [a for a in attempts if not a[0]]
        losers = [a for a in attempts if a[0]]
        assert len(winners) == 1 and len(losers) == 1, attempts
        assert "0 matches" in losers[0][1] and "nothing was changed" in losers[0][1], losers[0][1]
        current = index_file if doc_id == "index" else fresh.doc_text(doc_id)[0]
        assert winners[0][2]["new"] in current
        assert losers[0][2]["new"] not in current
        assert sum(line.startswith(marker) for line in current.splitlines()) == 1

    # Body writes of one doc: no torn file, and nothing a server wrote is lost without a trace.
    final = (local / "shared.md").read_text()
    server_bodies = [args["body"] for _n, args, is_error, _t in done if args["id"] == "shared"]
    for _n, args, is_error, text in done:
        if args["id"] == "shared":
            assert not is_error, text
    assert final in server_bodies + hand_texts + [shared_body("setup", 0)], "shared.md is torn"
    kept = history_texts(fresh, "shared")
    lost = [b for b in server_bodies if b != final and b not in kept]
    assert not lost, f"{len(lost)} server writes are neither the final text nor in history"
    hand_traced = sum(1 for h in hand_texts if h == final or h in kept)
    hand_untraced = [h for h in hand_texts if h != final and h not in kept and h not in superseded_by_hand]

    # Every doc in the tier is whole: one of the texts somebody wrote.
    known = set(server_bodies + hand_texts + [shared_body("setup", 0)])
    known |= {a["body"] for _n, a, _e, _t in done if "body" in a}
    for doc_id in fresh.doc_ids():
        if (local / f"{doc_id}.md").exists():
            text = fresh.doc_text(doc_id)[0]
            if doc_id == "race-doc":
                assert text in {f"# race doc\n\nstep: {w}\n" for w in ("original", "from A", "from B")}
            else:
                assert text in known, f"{doc_id} holds a text nobody wrote"
    assert not list(local.glob("**/.*.tmp")), "temp files left behind by clean writes"

    counts["concurrent operations (2 servers + hand editor)"] += len(done) + len(hand_texts)
    counts["concurrent: hand edits traced (final or in history)"] += hand_traced
    counts["concurrent: hand edits replaced by the next hand edit"] += len(superseded_by_hand)
    counts["concurrent: hand edits overwritten by a server untraced"] += len(hand_untraced)
    counts["concurrent: losses found"] += len(lost)
