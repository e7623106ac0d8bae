"""Crash injection: SIGKILL in the middle of write_doc, over and over.

Each round kills a writer at a random moment while it writes a ~0.9 MB doc and creates docs (each
create appends to the index), then checks the tier: the doc is exactly one whole text that was
written, the index is exactly the text before or after some number of appends, every created doc
is whole, and no leftover temp file is surfaced as a doc (ids, rendered index, resource listing,
search). Most rounds drive a DocStore in a forked child (cheap to start); a few go through the
real server over stdio. The rounds and checks are ``python -m bench soak``'s, at CI's counts.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from _tests.support.raw_server import write_config
from _tests.support.soak import crash
from biopb_mcp.docs.store import DocStore

STORE_ROUNDS = 30
SERVER_ROUNDS = 4
CREATES_PER_ROUND = 3


def test_sigkill_a_store_writer_mid_write(tmp_path: Path, counts: Counter[str]) -> None:
    local = tmp_path / "docs"
    DocStore(local).write_doc("big", body=crash.big_body("init"))  # so every later write replaces it
    tier = crash.TierCheck(local)
    before_index = (local / "index.md").read_text()
    rng = random.Random(8)
    for seed in range(STORE_ROUNDS):
        created = crash.kill_store_writer(local, seed, CREATES_PER_ROUND, rng, 0.25)
        before_index, problems = tier.check(before_index, [created], surfaces=seed % 5 == 4)
        assert not problems, problems
    assert not tier.check_surfaces(DocStore(local))
    counts["crash injections (SIGKILL, store writer)"] += STORE_ROUNDS
    counts["crash: stray temp files left in the tier (never surfaced)"] += tier.stray_temp_files


def test_sigkill_the_server_mid_write_doc(tmp_path: Path, counts: Counter[str]) -> None:
    env = write_config(tmp_path)
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    DocStore(local).write_doc("big", body=crash.big_body("init"))
    tier = crash.TierCheck(local)
    before_index = (local / "index.md").read_text()
    rng = random.Random(9)
    for r in range(SERVER_ROUNDS):
        orders = crash.kill_server_mid_write(env, tmp_path / f"stderr-{r}.log", f"srv-{r}", rng, 0.3)
        before_index, problems = tier.check(before_index, orders)
        assert not problems, problems
    counts["crash injections (SIGKILL, real server)"] += SERVER_ROUNDS
    counts["crash: stray temp files left in the tier (never surfaced)"] += tier.stray_temp_files
