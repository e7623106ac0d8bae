"""Reading a kernel message whose content holds a very big image without copying it twice more.

jupyter-client turns a message's JSON content into Python objects with ``json.loads``, which
decodes the whole UTF-8 text into one string and then builds the image's base64 value as a
second one: a 300 MB PNG (400 MB of base64) became 1.2 GB in the server while its message was
read. A display's ``image/png`` value is plain base64 (no quote, no backslash), so for a big
content this reader parses the JSON around it and leaves the value as a view of the received
bytes; ``KernelClient`` decodes it piece by piece into its file.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BIG_CONTENT_BYTES", "unpack"]

BIG_CONTENT_BYTES = 16 * 1024 * 1024
"""Content at least this big is searched for an ``image/png`` value to leave unparsed."""

_KEYS = (b'"image/png": "', b'"image/png":"')
"""The key as jupyter-client's packer writes it (and without the space, as others may)."""


def unpack(data: bytes | memoryview) -> Any:
    """``json.loads``, except that a big display's ``image/png`` value comes back as a
    ``memoryview`` of the received bytes (ASCII base64) instead of a ``str``."""
    if len(data) < BIG_CONTENT_BYTES:
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)
    raw = bytes(data) if isinstance(data, memoryview) else data
    for key in _KEYS:
        start = raw.find(key)
        if start >= 0:
            break
    else:
        return json.loads(raw)
    begin = start + len(key)
    end = raw.find(b'"', begin)
    # an unescaped quote inside a JSON string is impossible, so this is the value's end; base64
    # holds no backslash (an escape would need json.loads to read it)
    if end < 0 or raw.find(b"\\", begin, end) >= 0:
        return json.loads(raw)
    content = json.loads(raw[:begin] + raw[end:])
    data_bundle = content.get("data") if isinstance(content, dict) else None
    if not isinstance(data_bundle, dict) or data_bundle.get("image/png") != "":
        return json.loads(raw)  # the key was somewhere else: read it all the ordinary way
    data_bundle["image/png"] = memoryview(raw)[begin:end]
    return content
