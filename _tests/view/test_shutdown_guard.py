"""Only the server ends its kernel: other clients' shutdown requests are refused inside the kernel."""

from __future__ import annotations

from pathlib import Path

from jupyter_client import BlockingKernelClient

from _tests.support.isolation import make_settings
from _tests.support.processes import wait_gone
from _tests.support.runner import run_text
from biopb_mcp.kernel import KernelHost

run = run_text


def test_a_raw_shutdown_request_is_refused_and_the_servers_restart_and_shutdown_still_work(tmp_path: Path) -> None:
    host = KernelHost(make_settings(tmp_path))
    host.start()
    client = BlockingKernelClient()
    try:
        first = int(host.status().pid or 0)
        run(host, "kept = 'namespace intact'")
        client.load_connection_file(host.status().connection_file)
        client.start_channels()
        client.wait_for_ready(30)
        for restart in (False, True):
            msg_id = client.shutdown(restart=restart)
            reply = client.get_control_msg(timeout=30)
            assert reply["parent_header"]["msg_id"] == msg_id
            assert reply["content"]["status"] == "error"
            assert "only the server shuts it down" in reply["content"]["evalue"]
        # on the shell channel too (older clients send it there)
        client.shell_channel.send(client.session.msg("shutdown_request", {"restart": False}))
        assert client.get_shell_msg(timeout=30)["content"]["status"] == "error"
        assert not wait_gone(first, 1.0)
        assert "namespace intact" in run(host, "kept")
        assert host.state == "ready" and int(host.status().pid or 0) == first

        host.restart()
        assert wait_gone(first, 30)
        second = int(host.status().pid or 0)
        assert second != first and "2" in run(host, "1 + 1")
        host.shutdown()
        assert wait_gone(second, 30)
    finally:
        client.stop_channels()
        host.shutdown()
