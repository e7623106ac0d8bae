"""The live-cells tests' JupyterLab (:mod:`_tests.support.jupyter_lab`) under the test's isolated env, and
what the tests skip on."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jupyter_client import BlockingKernelClient

from _tests.support.jupyter_lab import JupyterLab, Notebook
from _tests.support.notebook_kernel import isolated_env

__all__ = ["REQUIRE_ENV", "SCIENTIST_CELL", "JupyterServer", "Notebook", "Opened", "cells_of", "require_rtc"]

INSTALL = "pip install -e '.[live]' (jupyter-collaboration, jupyter-nbmodel-client)"
REQUIRE_ENV = "BIOPB_REQUIRE_LIVE"
"""Set (CI does) to make a missing jupyter-collaboration or chromium fail the tests instead of skipping them."""


def require_rtc() -> None:
    """Skip (fail under ``BIOPB_REQUIRE_LIVE=1``) when the server or the test's Y client is missing."""
    missing = []
    for module in ("jupyter_server_ydoc", "jupyterlab", "jupyter_nbmodel_client", "pycrdt", "websockets"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        why = f"needs {', '.join(missing)}: {INSTALL}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(why)
        pytest.skip(why)


SCIENTIST_CELL: dict[str, Any] = {
    "cell_type": "code",
    "id": "scientist-1",
    "source": "threshold = 0.5",
    "metadata": {"tags": ["mine"]},
    "outputs": [],
    "execution_count": None,
}


@dataclass
class Opened:
    """A notebook as the scientist has it open: its kernel's channels and its room's document."""

    notebook: Notebook
    kernel: BlockingKernelClient
    doc: Any  # jupyter_nbmodel_client.NbModelClient, the browser's stand-in

    def run(self, code: str) -> str:
        """A cell the scientist runs; what it printed."""
        out: list[str] = []
        self.kernel.execute_interactive(
            code, output_hook=lambda m: out.append(str(m["content"].get("text", ""))), timeout=60
        )
        return "".join(out)


class JupyterServer(JupyterLab):
    """JupyterLab whose kernels (and the agents beside them) read the biopb config under ``root``."""

    def __init__(self, root: Path, extra_args: tuple[str, ...] = ()) -> None:
        super().__init__(root, isolated_env(root), extra_args)


def cells_of(doc: Any) -> list[dict[str, Any]]:
    """The notebook's cells as plain dicts, from a Y client's model (``as_dict``)."""
    return list(json.loads(json.dumps(doc.as_dict()["cells"])))
