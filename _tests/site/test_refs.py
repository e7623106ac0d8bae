"""The generated reference pages and config.example.toml match the code they are rendered from."""

from __future__ import annotations

import pytest

from _tests.site.refs import REF, REGENERATE, REPO, config_page, generated, mcp_pages, portable


@pytest.mark.parametrize("path", sorted(generated(), key=str), ids=lambda p: p.name)
def test_a_page_rendered_from_the_code_is_committed_as_rendered(path) -> None:
    render = generated()[path]
    assert path.is_file(), f"{path.relative_to(REPO)} is missing: run `{REGENERATE}`"
    assert path.read_text(encoding="utf-8") == portable(render()), (
        f"{path.relative_to(REPO)} drifted from the code: run `{REGENERATE}`"
    )


def test_the_mcp_reference_pages_match_what_a_real_server_lists(isolated_dirs) -> None:
    for name, text in mcp_pages().items():
        path = REF / name
        assert path.is_file(), f"docs/reference/{name} is missing: run `{REGENERATE}`"
        assert path.read_text(encoding="utf-8") == portable(text), (
            f"docs/reference/{name} drifted from the server: run `{REGENERATE}`"
        )


def test_the_config_reference_names_every_key_of_the_schema() -> None:
    from biopb_mcp.config.settings import SCHEMA

    page = config_page()
    missing = [k.dotted for k in SCHEMA if f"| `{k.name}` |" not in page]
    assert not missing and len(SCHEMA) > 10, missing


def test_no_generated_page_names_the_checkout_it_was_rendered_in() -> None:
    """A page is the same from every checkout: an install line shows the placeholder, not a path."""
    for path in [*generated(), *(REF / name for name in ("tools.md", "resources.md", "prompts.md", "errors.md"))]:
        assert str(REPO) not in path.read_text(encoding="utf-8"), path
