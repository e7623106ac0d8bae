"""Helpers for the seed tests: parse the shipped docs, extract their code and quoted APIs, run them in a kernel.

The parsing here is deliberately independent of biopb_mcp.docs: the seed gate must catch a
broken seed even when the store's own parser agrees with the mistake.
"""

from __future__ import annotations

import ast
import base64
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import biopb_mcp

DOCS_DIR = Path(biopb_mcp.__file__).parent / "_docs_data"
BODY_MAX_LINES = 300
INDEX_MAX_ENTRIES = 200
REFERENCE_MAX_LINES = 150
AUTHORING_MAX_LINES = 100
REFERENCES = ("kernel", "data", "outputs", "authoring", "viewer")

_ENTRY = re.compile(r"^\s*[-*]\s+([A-Za-z0-9._/-]+):\s*(.*)$")
_IGNORED = re.compile(r"^\s*ignored:(.*)$")
_LINK = re.compile(r"\[\[([^\]\s]+)\]\]")
_FENCE = re.compile(r"^```(\w*)\s*$")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")


@dataclass
class Index:
    """The seed index as the loader sees it: entries (id, hook, heading) and the ignored ids."""

    entries: list[tuple[str, str, str]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)

    def ids_under(self, heading: str) -> list[str]:
        return [doc_id for doc_id, _, h in self.entries if h == heading]


def parse_index(text: str) -> Index:
    """Recognise the two line shapes of the index; track the ## heading each entry sits under."""
    index = Index()
    heading = ""
    in_fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if line.startswith("## "):
            heading = line[3:].strip()
            index.headings.append(heading)
            continue
        if m := _IGNORED.match(line):
            index.ignored += [s.strip() for s in m.group(1).split(",") if s.strip()]
        elif m := _ENTRY.match(line):
            index.entries.append((m.group(1), m.group(2).strip(), heading))
    return index


def shipped_ids(docs_dir: Path = DOCS_DIR) -> list[str]:
    """Every shipped doc id (banked included), excluding the index itself."""
    ids = [p.relative_to(docs_dir).with_suffix("").as_posix() for p in docs_dir.rglob("*.md")]
    return sorted(i for i in ids if i != "index")


def is_banked(doc_id: str) -> bool:
    return any(seg.startswith("_") for seg in doc_id.split("/"))


def read(doc_id: str, docs_dir: Path = DOCS_DIR) -> str:
    return (docs_dir / f"{doc_id}.md").read_text(encoding="utf-8")


def split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """(scalar frontmatter keys, body). Frontmatter is optional."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end < 0:
        return {}, text
    meta: dict[str, str] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return meta, text[end + 5 :]


def code_blocks(text: str, lang: str = "python") -> list[str]:
    """The fenced blocks of one language, in document order (fences start at column 0)."""
    blocks: list[str] = []
    current: list[str] = []
    fence_lang: str | None = None  # None = outside any fence
    for line in text.splitlines():
        if fence_lang is None:
            if m := _FENCE.match(line):
                fence_lang = m.group(1)
                current = []
        elif line.startswith("```"):
            if fence_lang == lang:
                blocks.append("\n".join(current))
            fence_lang = None
        else:
            current.append(line)
    return blocks


def links(text: str) -> list[str]:
    return _LINK.findall(text)


def prose(text: str) -> str:
    """The text outside fenced blocks."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def parse_packages(value: str) -> list[tuple[str, str]]:
    """`scikit-image~=0.26, numpy~=2.0` -> [("scikit-image", "~=0.26"), ...]."""
    out: list[tuple[str, str]] = []
    for part in value.strip("[] ").split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([A-Za-z0-9._-]+)\s*((?:~=|==|>=|<=|!=|>|<).+)$", part)
        if not m:
            raise ValueError(f"bad package pin {part!r}: expected name~=x.y")
        out.append((m.group(1), m.group(2).replace(" ", "")))
    return out


# ---------------------------------------------------------------- quoted APIs


@dataclass(frozen=True)
class ApiRef:
    """One dotted name a doc quotes, resolved against the doc's own imports."""

    dotted: str  # fully qualified, e.g. "scipy.ndimage.distance_transform_edt"
    as_written: str  # e.g. "ndi.distance_transform_edt"
    keywords: tuple[str, ...] = ()  # keyword arguments used when it is called


def import_aliases(code: str) -> dict[str, str]:
    """alias -> module or object path, from the import statements of a doc's code."""
    aliases: dict[str, str] = {}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def api_refs(code: str, aliases: dict[str, str]) -> list[ApiRef]:
    """Dotted names rooted at an imported alias, with call keywords, from one code string."""
    tree = ast.parse(code)
    found: dict[str, ApiRef] = {}
    calls: dict[int, ast.Call] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            calls[id(node.func)] = node
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        written = _dotted(node)
        if written is None:
            continue
        root, _, rest = written.partition(".")
        if root not in aliases:
            continue
        full = aliases[root] + ("." + rest if rest else "")
        call = calls.get(id(node))
        kws = tuple(k.arg for k in call.keywords if k.arg) if call else ()
        key = f"{full}|{','.join(kws)}"
        found.setdefault(key, ApiRef(full, written, kws))
    return list(found.values())


def inline_api_refs(text: str, aliases: dict[str, str]) -> list[ApiRef]:
    """Dotted names quoted in inline `code` spans of the prose (e.g. `skimage.restoration.rolling_ball`)."""
    out: list[ApiRef] = []
    for span in _INLINE_CODE.findall(prose(text)):
        try:
            tree = ast.parse(span.strip(), mode="eval")
        except SyntaxError:
            continue
        out += api_refs(ast.unparse(tree), aliases)
    return out


# ---------------------------------------------------------------- kernel runner


class KernelError(AssertionError):
    """A code block failed in the kernel; carries the traceback text."""


def builtin_plugins() -> tuple[dict[str, str], list[str]]:
    """(env, kernel arguments) that give a kernel the server's built-in plugins (``show``, the save
    helpers, ...) through the same bootstrap file, as every kernel the server starts has them."""
    from biopb_mcp.kernel.plugins import BUILTIN_FILES
    from biopb_mcp.kernel.process import BOOTSTRAP_FILE

    env = {"BIOPB_MCP_BUILTIN_PLUGINS": os.pathsep.join(str(p) for p in BUILTIN_FILES)}
    return env, [f"--IPKernelApp.exec_files={BOOTSTRAP_FILE}"]


class KernelRunner:
    """A real IPython kernel driven through jupyter-client's blocking client, with the built-in
    plugins a kernel the server starts has (no doc has to define a helper first)."""

    def __init__(self, workdir: Path) -> None:
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="python3", connection_file=str(workdir / "kernel.json"))
        plugin_env, plugin_args = builtin_plugins()
        # keep IPython's profile, history and runtime files out of the user's home
        env = dict(
            os.environ,
            IPYTHONDIR=str(workdir / "ipython"),
            JUPYTER_RUNTIME_DIR=str(workdir / "runtime"),
            JUPYTER_DATA_DIR=str(workdir / "data"),
            JUPYTER_CONFIG_DIR=str(workdir / "config"),
            **plugin_env,
        )
        self.km.start_kernel(
            cwd=str(workdir), env=env, extra_arguments=["--HistoryManager.enabled=False", *plugin_args]
        )
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.last_images: list[bytes] = []  # PNGs displayed by the last run()

    def run(self, code: str, timeout: float = 60) -> str:
        """Execute code; return stdout+stderr; raise KernelError with the traceback on error."""
        out: list[str] = []
        errors: list[str] = []
        self.last_images = []

        def hook(msg: dict[str, Any]) -> None:
            kind = msg["msg_type"]
            content = msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind in ("display_data", "execute_result") and "image/png" in content["data"]:
                self.last_images.append(base64.b64decode(content["data"]["image/png"]))
            elif kind == "error":
                errors.append(re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(content["traceback"])))

        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=hook, allow_stdin=False)
        if reply["content"]["status"] != "ok" or errors:
            raise KernelError("code failed in the kernel:\n" + code[:2000] + "\n---\n" + "\n".join(errors))
        return "".join(out)

    def reset(self) -> None:
        self.run("%reset -f")

    def shutdown(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)
