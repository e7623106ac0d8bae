"""inspect_object: the expression that asks the kernel about one object, and its answer as text.

The kernel side is ``inside/inspect_probe.py``, sent as source in a ``user_expressions`` entry: it runs
in a throwaway dict, so it adds no name to the user's namespace, and needs no biopb_mcp in the
kernel's environment.
"""

from __future__ import annotations

import functools

from biopb_mcp.kernel.inside import INSIDE_DIR

__all__ = ["inspect_expression"]

PROBE_FILE = INSIDE_DIR / "inspect_probe.py"


@functools.cache
def _probe() -> str:
    return PROBE_FILE.read_text(encoding="utf-8")


def inspect_expression(path: str, limit_repr: int = 2000, limit_doc: int = 3000) -> str:
    """A ``user_expressions`` entry that describes ``path`` in the kernel and yields JSON."""
    call = f"g['describe']({path!r}, get_ipython().user_ns, {limit_repr}, {limit_doc})"
    return f"(lambda g: (exec({_probe()!r}, g), {call})[1])({{'__name__': 'biopb_mcp_inspect'}})"
