"""Naming the kernel to join: --existing [FILE] / kernel.existing, as jupyter console --existing does."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from biopb_mcp.errors import KernelError
from biopb_mcp.kernel.existing import find_existing, read_connection_info

INFO = {
    "transport": "tcp",
    "ip": "127.0.0.1",
    "key": "k",
    "signature_scheme": "hmac-sha256",
    "shell_port": 5001,
    "iopub_port": 5002,
    "stdin_port": 5003,
    "control_port": 5004,
    "hb_port": 5005,
}


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rt = tmp_path / "jupyter-runtime"
    rt.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(rt))
    monkeypatch.chdir(tmp_path)
    return rt


def write(path: Path, stamp: float) -> Path:
    path.write_text(json.dumps(INFO))
    os.utime(path, (stamp, stamp))
    return path


def test_no_name_picks_the_most_recently_used_kernel(runtime: Path) -> None:
    write(runtime / "kernel-old.json", 1_000_000)
    newest = write(runtime / "kernel-new.json", 2_000_000)
    write(runtime / "kernel-older.json", 500_000)
    assert find_existing(None) == newest.resolve()
    assert find_existing("") == newest.resolve()


def test_a_bare_name_or_part_of_it_is_looked_up_in_the_runtime_dir(runtime: Path) -> None:
    one = write(runtime / "kernel-3f2a.json", 1_000_000)
    write(runtime / "kernel-9999.json", 2_000_000)
    assert find_existing("kernel-3f2a.json") == one.resolve()
    assert find_existing("3f2a") == one.resolve()


def test_a_path_is_taken_as_is(runtime: Path, tmp_path: Path) -> None:
    (tmp_path / "copies").mkdir()
    copied = write(tmp_path / "copies" / "kernel-hpc.json", 1)
    assert find_existing(str(copied)) == copied.resolve()
    with pytest.raises(KernelError, match="no kernel connection file at"):
        find_existing(str(tmp_path / "copies" / "nope.json"))


def test_nothing_to_find_names_where_it_looked(runtime: Path) -> None:
    with pytest.raises(
        KernelError, match=re.escape("no kernel-*.json in the current directory or Jupyter's runtime dir")
    ):
        find_existing(None)
    with pytest.raises(KernelError, match="no kernel connection file matching 'abc'"):
        find_existing("abc")


def test_read_connection_info_checks_the_shape(tmp_path: Path) -> None:
    good = tmp_path / "k.json"
    good.write_text(json.dumps(INFO))
    assert read_connection_info(good)["shell_port"] == 5001
    for text, message in [
        ("[1]", "not a JSON object"),
        ("{", "cannot read"),
        (json.dumps({**INFO, "hb_port": "x"}), "bad port numbers for hb_port"),
        (json.dumps({k: v for k, v in INFO.items() if k != "key"}), "no key"),
        (json.dumps({**INFO, "transport": "udp"}), "unknown transport"),
    ]:
        good.write_text(text)
        with pytest.raises(KernelError, match=message):
            read_connection_info(good)
    with pytest.raises(KernelError, match="is gone"):
        read_connection_info(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("key", 12345, "key is int, not text"),
        ("signature_scheme", "hmac-nope", "signature_scheme 'hmac-nope' is not hmac-<hash>"),
        ("signature_scheme", "rot13", "signature_scheme 'rot13' is not hmac-<hash>"),
        ("signature_scheme", "hmac-shake_128", "is not hmac-<hash>"),
        ("signature_scheme", 7, "signature_scheme 7 is not"),
        ("transport", ["tcp"], r"unknown transport \['tcp'\]"),
        ("shell_port", True, "bad port numbers for shell_port"),
        ("hb_port", 70000, "bad port numbers for hb_port"),
        ("ip", 7, "ip 7 is not an address"),
        ("ip", "", "ip '' is not an address"),
        ("kernel_name", 3, "kernel_name 3 is not text"),
        ("curve_publickey", "k" * 40, "curve_publickey is given without curve_secretkey"),
        ("curve_secretkey", "k" * 39, "curve_secretkey is given without curve_publickey"),
    ],
)
def test_every_field_a_client_uses_is_checked_and_named(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    crafted = tmp_path / "kernel-crafted.json"
    crafted.write_text(json.dumps({**INFO, field: value}))
    with pytest.raises(KernelError, match=message) as caught:
        read_connection_info(crafted)
    assert str(crafted) in str(caught.value)
    assert '"k"' not in str(caught.value) and "'k'" not in str(caught.value)  # the key's value is never shown


@pytest.mark.parametrize("bad", ["short", "k" * 39 + "~", 40, None])
def test_a_malformed_curve_key_is_named_and_never_shown(tmp_path: Path, bad: object) -> None:
    crafted = tmp_path / "kernel-crafted.json"
    good = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"  # a public key as zmq.curve_keypair writes one
    crafted.write_text(json.dumps({**INFO, "curve_publickey": good, "curve_secretkey": bad}))
    with pytest.raises(KernelError, match="curve_secretkey is not a CurveZMQ key") as caught:
        read_connection_info(crafted)
    assert "curve_publickey" not in str(caught.value) and good not in str(caught.value)
    if isinstance(bad, str):
        assert bad not in str(caught.value)


def test_a_deeply_nested_connection_file_is_a_clear_error(tmp_path: Path) -> None:
    crafted = tmp_path / "kernel-deep.json"
    crafted.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(KernelError, match="cannot read the kernel connection file"):
        read_connection_info(crafted)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("key", 12345, "key is int"),
        ("signature_scheme", "hmac-nope", "signature_scheme"),
        ("shell_port", True, "shell_port"),
    ],
)
async def test_start_kernel_on_a_crafted_connection_file_names_the_field(
    tmp_path: Path, isolated_dirs: Path, field: str, value: object, named: str
) -> None:
    """Through a real MCP session: the agent reads which field is wrong, never "Error executing tool"."""
    import anyio
    from mcp import Client

    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.server import build_server

    crafted = tmp_path / "kernel-crafted.json"
    crafted.write_text(json.dumps({**INFO, field: value}))
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    (isolated_dirs / "config.toml").write_text(f'[kernel]\nexisting = "{crafted}"\n')
    server, state = build_server(load_settings())
    try:
        with anyio.fail_after(60):
            async with Client(server) as client:
                result = await client.call_tool("start_kernel", {})
    finally:
        state.kernel.shutdown()
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert result.is_error and named in text and str(crafted) in text, text
    assert "Error executing tool" not in text
