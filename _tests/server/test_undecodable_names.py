"""A file name that is not valid UTF-8 (or holds control characters) never ends a session.

Over stdio, with the SDK's real client, as a user meets it: a Windows zip leaves
``Messung_Z\\xfcrich.tif`` in the working directory and a prompt's file argument is completed.
The name comes back in the escape a Python string literal reads, which opens that same file in
the kernel; and a server whose escape is switched off (standing in for any name that slips
through) answers that one request with an error and goes on serving.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp.types import INTERNAL_ERROR, JSONRPCError, JSONRPCResponse, PromptReference, TextContent

from _tests.support.http_start import started
from _tests.support.results import text_of
from _tests.support.stdio_procs import make_env
from biopb_mcp.fs.names import escape_name, unescape_name
from biopb_mcp.fs.workdir import matching_paths
from biopb_mcp.server.unsendable import GuardedWriteStream

pytestmark = pytest.mark.anyio

WAIT = 120.0
FLATFIELD = PromptReference(type="ref/prompt", name="flatfield")
LATIN1_NAME = b"Messung_Z\xfcrich.tif"

SERVER_WITHOUT_ESCAPES = """\
import sys
import biopb_mcp.fs.workdir as workdir
workdir.escape_name = lambda name: name  # a source that forgets the escape
from biopb_mcp.cli import main
sys.exit(main(["serve", *sys.argv[1:]]))
"""


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    with open(os.path.join(os.fsencode(work), LATIN1_NAME), "wb") as f:
        f.write(b"zurich")
    os.mkdir(os.path.join(os.fsencode(work), b"Ordner_\xe4"))
    with open(os.path.join(os.fsencode(work), b"Ordner_\xe4", b"bell\x07\x1b[31m.tif"), "wb") as f:
        f.write(b"bell")
    return work


async def test_an_undecodable_file_name_completes_escaped_and_opens_in_the_kernel(tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "biopb_mcp"], env={**os.environ, **make_env(tmp_path)}, cwd=str(work)
    )
    with anyio.fail_after(WAIT):
        async with Client(params, cache=None) as client:
            assert not (await client.call_tool("start_kernel", {})).is_error
            found = (await client.complete(FLATFIELD, {"name": "image", "value": "Mess"})).completion.values
            inner = (await client.complete(FLATFIELD, {"name": "image", "value": "Ordner_\\udce4/"})).completion.values
            # the shown value, put in a Python string as it is, reaches the same file
            read = text_of(await client.call_tool("execute_code", {"code": f'print(open("{found[0]}", "rb").read())'}))
            bell = text_of(await client.call_tool("execute_code", {"code": f'print(open("{inner[0]}", "rb").read())'}))
            got = await client.get_prompt("flatfield", {"image": found[0]})
    assert found == ["Messung_Z\\udcfcrich.tif"]
    assert inner == ["Ordner_\\udce4/bell\\x07\\x1b[31m.tif"]  # no raw BEL or ESC reaches the host
    assert "b'zurich'" in read and "b'bell'" in bell
    content = got.messages[0].content
    assert isinstance(content, TextContent)
    request = content.text
    assert "Messung_Z\\udcfcrich.tif" in request and "Python string" in request


async def test_an_answer_that_cannot_be_encoded_is_an_error_and_the_session_goes_on(tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    script = tmp_path / "server_without_escapes.py"
    script.write_text(SERVER_WITHOUT_ESCAPES)
    env = {**os.environ, **make_env(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    params = StdioServerParameters(command=sys.executable, args=[str(script)], env=env, cwd=str(work))
    with anyio.fail_after(WAIT):
        async with Client(params, cache=None) as client:
            assert not (await client.call_tool("start_kernel", {})).is_error
            with pytest.raises(MCPError) as refused:
                await client.complete(FLATFIELD, {"name": "image", "value": "Mess"})
            after = await client.call_tool("execute_code", {"code": "print(6 * 7)"})
            listed = await client.list_prompts()
    assert refused.value.code == INTERNAL_ERROR and "not valid Unicode" in refused.value.error.message
    assert "42" in text_of(after) and listed.prompts


async def test_the_stdio_writer_sends_an_error_for_a_response_it_cannot_encode() -> None:
    """What no middleware sees (a response built elsewhere) is caught at the writer itself."""
    send, receive = anyio.create_memory_object_stream[SessionMessage](2)
    guarded = GuardedWriteStream(send)
    with anyio.fail_after(5), send, receive:
        await guarded.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=7, result={"text": "Z\udcfcrich"})))
        await guarded.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=8, result={"text": "fine"})))
        first, second = await receive.receive(), await receive.receive()
    assert isinstance(first, SessionMessage) and isinstance(second, SessionMessage)
    assert isinstance(first.message, JSONRPCError) and first.message.id == 7
    assert first.message.error.code == INTERNAL_ERROR
    assert isinstance(second.message, JSONRPCResponse) and second.message.result == {"text": "fine"}


def test_shown_names_read_back_to_the_name_and_are_plain_text() -> None:
    for raw in [b"plain.tif", b"Z\xfcrich", b"a\\b", b"bell\x07", b"new\nline", b"\xc3\xbc-utf8", b"tab\tesc\x1b"]:
        name = os.fsdecode(raw)
        shown = escape_name(name)
        assert shown.isprintable() and shown.encode("utf-8")
        assert unescape_name(shown) == name
    assert escape_name("ü.tif") == "ü.tif"  # valid names are shown as they are
    assert unescape_name("trailing\\") is None


def test_completion_values_are_escaped_and_typed_escapes_are_read(tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    assert matching_paths(work, "Mess").values == ["Messung_Z\\udcfcrich.tif"]
    assert matching_paths(work, "Ordner_\\udce4/b").values == ["Ordner_\\udce4/bell\\x07\\x1b[31m.tif"]
    assert matching_paths(work, "Ordner_\\").values == []  # a broken escape: still typing


async def test_over_http_an_answer_that_cannot_be_encoded_is_an_error_and_the_server_goes_on(tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    script = tmp_path / "server_without_escapes.py"
    script.write_text(SERVER_WITHOUT_ESCAPES)
    env = {**os.environ, **make_env(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    err = tmp_path / "http.err"
    with err.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(script), "--transport", "http", "--port", "0"],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        with anyio.fail_after(WAIT):
            while (found := started(err.read_text(errors="replace"))) is None:
                assert proc.poll() is None, err.read_text(errors="replace")
                await anyio.sleep(0.05)
            url, token = found
            async with (
                httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
            ):
                with pytest.raises(MCPError) as refused:
                    await client.complete(FLATFIELD, {"name": "image", "value": "Mess"})
                listed = await client.list_prompts()
    finally:
        proc.terminate()
        proc.wait(30)
    assert refused.value.code == INTERNAL_ERROR and "not valid Unicode" in refused.value.error.message
    assert listed.prompts
