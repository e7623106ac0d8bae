"""Rendering without a kernel: bounds, paging notes, ANSI stripping, oversized images."""

from __future__ import annotations

from pathlib import Path

import pytest

from _tests.support.kernel_helpers import png_bytes
from biopb_mcp.kernel import Ending, Execution, HostEnding, KernelState, rendering
from biopb_mcp.kernel.executions import strip_ansi
from biopb_mcp.text.kernel import execution_note, rendered_text


def finished(text: str) -> Execution:
    ex = Execution("job-7", "code", "msg")
    ex.add_stream("stdout", text)
    ex.finish("ok")
    return ex


def test_short_output_is_shown_whole_without_notes() -> None:
    r = rendering.render(finished("a\nb\n"), 0, 100, header=False)
    assert rendered_text(r) == "a\nb" and r.next_offset is None and r.total_chars == 4


def test_long_output_is_cut_with_a_note_naming_the_next_offset() -> None:
    r = rendering.render(finished("x" * 250), 0, 100, header=False)
    assert rendered_text(r).startswith("x" * 50 + "\n[output truncated: showing chars 0-50 and 200-250 of 250;")
    assert 'poll_job("job-7", offset=50)' in rendered_text(r) and r.next_offset == 50
    last = rendering.render(finished("x" * 250), 200, 100, header=False)
    text = rendered_text(last)
    assert text.splitlines()[:2] == [
        "job-7: finished in " + text.split("finished in ")[1].split("\n")[0],
        "[showing chars 200-250 of 250]",
    ]
    assert last.next_offset is None


def test_a_long_first_page_shows_head_and_tail_and_where_the_middle_is() -> None:
    """The end of a long run (its summary, its error) is on the first page, not many polls away."""
    text = "".join(f"line {i:04d}\n" for i in range(1000)) + "Traceback: the end\n"
    r = rendering.render(finished(text), 0, 200, header=False)
    shown = rendered_text(r)
    assert shown.startswith("line 0000\nline 0001\n") and shown.endswith("line 0999\nTraceback: the end")
    assert r.next_offset == 100 and r.tail_offset > 100 and r.middle == r.tail_offset - 100
    assert f"the {r.middle} chars between are not shown" in shown
    assert 'poll_job("job-7", offset=100) pages them' in shown
    assert len(shown) < 200 + 300
    # paging from the middle offset goes on in order to the end
    page = rendering.render(finished(text), r.next_offset or 0, 200, header=True)
    assert page.output == text[100:300] and not page.tail


def test_a_page_is_data_naming_no_tool_and_the_server_words_it() -> None:
    ex = Execution("job-7", "code", "msg")
    ex.add_stream("stdout", "x" * 250)
    page = rendering.render(ex, 100, 100, header=False)
    assert (page.output, page.offset, page.end, page.total_chars) == ("x" * 100, 100, 200, 250)
    assert page.status == "running" and page.header and page.truncated and page.next_offset == 200
    assert not any("poll_job" in str(value) for value in vars(page).values())
    assert rendered_text(page) == "\n".join(
        [
            f"job-7: running for {page.elapsed:.1f} s; output so far:",
            "[showing chars 100-200 of 250]",
            "x" * 100,
            '[output truncated: showing chars 100-200 of 250; 50 more chars. Read on with poll_job("job-7", offset=200).]',
        ]
    )
    tail = rendering.render(ex, 250, 100, header=True)
    assert not tail.truncated and tail.next_offset == 250 and tail.output == ""
    assert rendered_text(tail).splitlines()[1:] == [
        '[still running: poll_job("job-7", offset=250) shows what follows.]'
    ]


@pytest.mark.parametrize(
    ("lost", "ending", "note", "advice"),
    [
        (
            KernelState.DEAD,
            HostEnding(Ending.KERNEL_LOST, "exit code 1", "boom"),
            "The kernel died (exit code 1). Last kernel log lines:\nboom\n",
            "Call start_kernel to start a fresh kernel (namespace lost).",
        ),
        (
            KernelState.GONE,
            HostEnding(Ending.KERNEL_LOST, "it was restarted by its frontend"),
            "The joined kernel is gone: it was restarted by its frontend.",
            " Call start_kernel to join it again once its frontend runs it.",
        ),
    ],
)
def test_a_lost_kernel_is_a_fact_the_server_turns_into_advice(
    lost: KernelState, ending: HostEnding, note: str, advice: str
) -> None:
    """The host's facts (how the kernel went, its log tail) reach the page; the note is text's."""
    ex = Execution("job-7", "code", "msg")
    ex.finish("dead", kernel_lost=lost, ending=ending)
    page = rendering.render(ex, 0, 100, header=False)
    assert page.kernel_lost == lost and page.ending == ending and page.note == "" and page.header
    assert execution_note(page.note, page.ending, page.kernel_lost) == note  # the session notebook's note
    assert rendered_text(page) == "\n".join(
        [f"job-7: the kernel died while this ran ({page.elapsed:.1f} s).", "(no output)", note + advice]
    )


@pytest.mark.parametrize(
    ("why", "note"),
    [
        (Ending.RESTARTED, "The kernel was restarted while this ran; its namespace is gone."),
        (Ending.SHUT_DOWN, "The server shut the kernel down while this ran."),
    ],
)
def test_an_execution_the_host_ended_carries_why_and_text_writes_its_note(why: Ending, note: str) -> None:
    ex = Execution("job-3", "code", "msg")
    ex.finish("aborted", ending=HostEnding(why))
    page = rendering.render(ex, 0, 100, header=False)
    assert page.ending == HostEnding(why) and page.note == "" and page.kernel_lost is None
    assert execution_note(page.note, page.ending, page.kernel_lost) == note
    assert rendered_text(page).endswith("\n" + note)


def test_offset_past_the_end_says_so() -> None:
    r = rendering.render(finished("abc"), 10, 100, header=True)
    assert "[offset 10 is past the end: the output has 3 chars]" in rendered_text(r)


def test_ansi_codes_are_stripped() -> None:
    assert strip_ansi("\x1b[0;31mValueError\x1b[0m: x\x1b]8;;http://a\x07link\x1b]8;;\x07") == "ValueError: x" + "link"


def test_oversized_image_is_saved_to_a_file_not_attached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rendering, "downscale_png", lambda data, max_bytes: None)  # as without Pillow
    data = png_bytes(64, 64)
    ex = Execution("job-3", "code", "msg")
    ex.add_image(rendering.image_factory(data, ex.job_id, 10, tmp_path / "images"))
    ex.finish("ok")
    r = rendering.render(ex, 0, 1000, header=False)
    assert r.images == []
    saved = tmp_path / "images" / "job-3-image1.png"
    assert saved.read_bytes() == data
    assert (
        f"64x64 PNG, {len(data)} bytes > max_image_bytes=10; not attached; full size saved to {saved}"
        in rendered_text(r)
    )


def test_oversized_image_is_downscaled_when_pillow_is_there(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    data = png_bytes(400, 400)
    limit = len(data) // 2
    ex = Execution("job-4", "code", "msg")
    ex.add_image(rendering.image_factory(data, ex.job_id, limit, tmp_path))
    r = rendering.render(ex, 0, 1000, header=False)
    assert len(r.images) == 1 and len(r.images[0]) <= limit
    assert "attached downscaled to" in rendered_text(r) and (tmp_path / "job-4-image1.png").exists()


def test_a_running_jobs_page_keeps_its_last_newline_so_pages_join() -> None:
    ex = Execution("job-8", "code", "msg")
    ex.add_stream("stdout", "line 1\nline 2\n")
    first = rendering.render(ex, 0, 100, header=False)
    assert first.output == "line 1\nline 2\n" and first.next_offset == 14
    ex.add_stream("stdout", "line 3\n")
    ex.finish("ok")
    rest = rendering.render(ex, first.next_offset, 100, header=False)
    assert first.output + rest.output == "line 1\nline 2\nline 3"
