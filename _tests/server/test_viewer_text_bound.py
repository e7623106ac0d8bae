"""look_at_viewer's answer stays within max_result_bytes with its screenshot, whatever the names."""

from __future__ import annotations

from mcp.types import ImageContent

from _tests.support.kernel_helpers import png_bytes
from _tests.support.results import text_of
from biopb_mcp.kernel.viewer import LayerFacts, ViewerLook, ViewerState
from biopb_mcp.server.result_size import encoded_size
from biopb_mcp.server.tools.viewer import _result
from biopb_mcp.text.viewer import look_text


def test_many_wide_names_leave_the_screenshot_its_room() -> None:
    """Sixty layers named in emoji (12 bytes each as JSON escapes) at the smallest allowed limit."""
    limit = 65536
    layers = [LayerFacts(name="\U0001f642" * 5000, type="image", visible=True, shape=(1,) * 40) for _ in range(60)]
    look = ViewerLook(
        ViewerState.OPEN, layers=layers, title="\U0001f642" * 10_000, sliders=[(i, "t" * 999, 0, 3) for i in range(50)]
    )
    result = _result(look_text(look, "[image 1: placeholder]"), png_bytes(200, 200), limit)
    assert encoded_size(result) <= limit
    assert any(isinstance(block, ImageContent) for block in result.content)
    text = text_of(result)
    assert "(5000 characters)" in text and "max_result_bytes=65536" in text and "… 34 more axes" in text
