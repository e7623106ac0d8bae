"""Helpers for the reliability tests that only tests need; the attacks and checks live in
:mod:`_tests.support.soak`.

The reliability tests and ``python -m bench soak`` share their generators and checks
(``_tests.support.soak``'s ``hostile_ids``, ``crash``, ``writers``, and ``raw_server``): CI runs
them at small counts, the soak at big ones.
"""

from __future__ import annotations

import os

from mcp import StdioServerParameters

from _tests.support.stdio_procs import stdio_params as shared_stdio_params


def stdio_params(env: dict[str, str]) -> StdioServerParameters:
    """Parameters for the real server over stdio, in its own config tree (the whole environment kept)."""
    return shared_stdio_params({**os.environ, **env})
