"""The TOML line scanner: every key tomllib reads is located on the line that writes it."""

from __future__ import annotations

import tomllib
from typing import Any

import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from biopb_mcp.config.toml_lines import key_lines, leading_key

DOC = """\
# a comment with key = 1 in it
top = 1
[kernel]
name = \"\"\"
promote_after = 'inside a string'
[not_a_table]
\"\"\"
"promote_after" = 2.5  # a comment
paths = [
  "a = b",  # key = 3 in a comment
  ['''

nested''', "]"],
]
literal = '''x = 1'''
when = 1979-05-27 07:32:00Z
[ http . "sub.part" ]
inner = { port = 1, deep = { flag = true }, list = [{ hidden = 1 }] }
a.b.c = "dotted"

[[jobs]]
id = 1
[[jobs]]
id = 2
"""


def test_every_key_of_a_tricky_document_is_on_its_own_line() -> None:
    tomllib.loads(DOC)  # the scanner's input is text tomllib accepts
    lines = key_lines(DOC)
    assert lines == {
        "top": 2,
        "kernel": 3,
        "kernel.name": 4,
        "kernel.promote_after": 8,
        "kernel.paths": 9,
        "kernel.literal": 15,
        "kernel.when": 16,
        "http": 17,
        "http.sub.part": 17,
        "http.sub.part.inner": 18,
        "http.sub.part.inner.port": 18,
        "http.sub.part.inner.deep": 18,
        "http.sub.part.inner.deep.flag": 18,
        "http.sub.part.inner.list": 18,
        "http.sub.part.a": 19,
        "http.sub.part.a.b": 19,
        "http.sub.part.a.b.c": 19,
        "jobs": 21,
        "jobs.id": 22,
    }


def test_text_it_cannot_follow_keeps_what_came_before() -> None:
    assert key_lines("[kernel]\nname = 'x'\nthis is not toml\nlater = 1\n") == {"kernel": 1, "kernel.name": 2}
    assert key_lines('a = """never closed\nb = 1\n') == {"a": 1}


def test_leading_key_names_the_key_a_line_assigns() -> None:
    assert leading_key("promote_after = 10 s") == "promote_after"
    assert leading_key('  kernel . "name" = 3') == "kernel.name"
    assert leading_key("[kernel") is None
    assert leading_key("# name = 1") is None
    assert leading_key("just words") is None
    assert leading_key("") is None


_names = st.text(st.sampled_from("ab_-1. =#\"'[]"), min_size=1, max_size=6)
_scalars = st.one_of(st.integers(), st.booleans(), st.text(max_size=8), st.floats(allow_nan=False))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
_docs = st.recursive(
    st.dictionaries(_names, _values, max_size=4),
    lambda inner: st.dictionaries(_names, st.one_of(_values, inner), max_size=4),
    max_leaves=12,
)


def leaf_paths(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for key, value in doc.items():
        path = (*prefix, key)
        out += leaf_paths(value, path) if isinstance(value, dict) else [path]
    return out


@settings(max_examples=60, deadline=None)
@given(_docs, st.booleans())
def test_each_key_of_any_written_document_is_found_on_a_line_holding_it(doc: dict[str, Any], multiline: bool) -> None:
    text = tomli_w.dumps(doc, multiline_strings=multiline)
    lines = key_lines(text)
    rows = text.split("\n")  # TOML breaks lines at \n only; str.splitlines also at \x85 and others
    for path in leaf_paths(tomllib.loads(text)):
        if any("." in part for part in path):
            continue  # a dot inside a quoted key cannot be told apart once joined
        dotted = ".".join(path)
        assert dotted in lines, (dotted, text)
        row = rows[lines[dotted] - 1]
        assert "=" in row and (path[-1] in row or "\\" in row), (dotted, row, text)
