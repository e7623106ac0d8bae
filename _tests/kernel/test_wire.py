"""Reading kernel messages: a big display's base64 stays the received bytes; anything else is json.loads."""

from __future__ import annotations

import base64
import json

from jupyter_client.session import json_packer

from biopb_mcp.kernel import wire


def test_a_big_images_value_is_a_view_of_the_received_bytes() -> None:
    png = base64.b64encode(b"\x89PNG" + bytes(range(256)) * 70_000).decode()
    content = {"data": {"text/plain": 'an "image/png": "x" in text', "image/png": png}, "metadata": {}, "transient": {}}
    packed = json_packer(content)
    assert len(packed) >= wire.BIG_CONTENT_BYTES
    read = wire.unpack(packed)
    value = read["data"].pop("image/png")
    assert isinstance(value, memoryview) and bytes(value).decode() == png
    assert read == {"data": {"text/plain": 'an "image/png": "x" in text'}, "metadata": {}, "transient": {}}


def test_small_or_other_content_is_read_as_json() -> None:
    small = json_packer({"data": {"image/png": "aGk="}})
    assert wire.unpack(small) == json.loads(small)
    odd = json.dumps({"metadata": {"image/png": "x" * wire.BIG_CONTENT_BYTES}, "data": {}}).encode()
    assert wire.unpack(odd) == json.loads(odd)  # the key is not a display's value: read it all
