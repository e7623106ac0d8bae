"""stdio hygiene in a real process: after claim_stdio only the wire reaches the parent's pipe."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from _tests.support.stdio_procs import RawServer, make_env

SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys
    from pathlib import Path
    from biopb_mcp.server.transports.stdio import claim_stdio

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


UNREADABLE = [
    # (raw line, expected error code, expected id)
    (b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700, None),
    (b'[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"s": "\\ud800"}}', -32600, 3),
    (b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"n": ' + b"9" * 5000 + b"}}", -32600, 4),
    (b'{"jsonrpc": "2.0", "id": ' + b"7" * 5000 + b', "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": "six"}', -32600, "six"),
    (b"42", -32600, None),
    # an id the SDK cannot echo would make the line a notification, never answered
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600, 1.5),
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', -32600, None),  # MCP allows no null id
    (b'{"jsonrpc": "2.0", "\\u0069d": true, "method": "tools/list"}', -32600, None),  # the key spelled with an escape
    # a readable id is answered with its own id and the field that is wrong, not another one
    (b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": "not an object"}', -32600, 7),
    (b'{"jsonrpc": "1.0", "id": 8, "method": "ping"}', -32600, 8),
    (b'{"jsonrpc": "2.0", "id": 10, "method": 5}', -32600, 10),
]

REASONS: dict[object, str] = {7: "params", 8: "jsonrpc", 10: "method"}


def test_every_unreadable_line_gets_a_json_rpc_error_and_the_server_still_answers(tmp_path: Path) -> None:
    server = RawServer(make_env(tmp_path), tmp_path / "stderr.log")
    try:
        server.initialize()
        assert server.proc.stdin is not None
        for line, code, request_id in UNREADABLE:
            server.proc.stdin.write(line + b"\n")
            server.proc.stdin.flush()
            reply = server.read_message(timeout=30)
            assert reply.get("id") == request_id and reply["error"]["code"] == code, (line[:60], reply)
            assert len(reply["error"]["message"]) < 400
            assert REASONS.get(request_id, "") in reply["error"]["message"], reply
        ping = server.request("ping")
        assert server.response(ping, timeout=30) == {"jsonrpc": "2.0", "id": ping, "result": {}}
    finally:
        server.close()


def test_an_unknown_tool_or_prompt_is_invalid_params(tmp_path: Path) -> None:
    """The seeded index lists procedures, so prompts are advertised (with the list changes this
    server sends); a name that is none of them is still -32602."""
    server = RawServer(make_env(tmp_path), tmp_path / "stderr.log")
    try:
        init = server.initialize()
        assert init["capabilities"]["prompts"] == {"listChanged": True} and "tools" in init["capabilities"]
        for method, params in (
            ("tools/call", {"name": "no_such_tool", "arguments": {}}),
            ("prompts/get", {"name": "no-such-prompt"}),
        ):
            reply = server.response(server.request(method, params), timeout=30)
            assert reply["error"]["code"] == -32602 and "no" in reply["error"]["message"], reply
    finally:
        server.close()
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()
