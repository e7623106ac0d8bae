"""stdio hygiene in a real process: after claim_stdio only the wire reaches the parent's pipe."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys
    from pathlib import Path
    from biopb_mcp.stdio_guard import claim_stdio

    wire = claim_stdio(Path(sys.argv[1]))
    print("stray print")                                   # Python-level
    os.write(1, b"stray fd write\\n")                       # C-level, straight to fd 1
    subprocess.run([sys.executable, "-c", "print('child print')"], check=True)  # inherited fd 1
    leaked = sys.stdin.read()                                # fd 0 is /dev/null now
    line = os.read(wire.read_fd, 100)                        # the parent's input arrives here
    os.write(wire.write_fd, b"WIRE " + line + b"stdin:" + repr(leaked).encode() + b"\\n")
    """
)


def test_stray_output_goes_to_the_log_and_only_the_wire_reaches_stdout(tmp_path: Path) -> None:
    log = tmp_path / "state" / "server.log"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log)],
        input=b"hello\n",
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout == b"WIRE hello\nstdin:''\n"
    logged = log.read_text()
    for stray in ("stray print", "stray fd write", "child print"):
        assert stray in logged
