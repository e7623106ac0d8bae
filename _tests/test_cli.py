"""The biopb-mcp command: main(argv) for each command, and the real console script as a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import biopb_mcp
from _tests.support.isolation import isolated_vars
from biopb_mcp.cli import commands as cli
from biopb_mcp.cli import config as cli_config
from biopb_mcp.config.settings import render_example
from biopb_mcp.docs.store import SHIPPED_DIR


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


# --- help, version, usage errors ------------------------------------------------------------


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"biopb-mcp {biopb_mcp.__version__}"
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "examples:" in out and "config show" in out
    for sub in (["serve", "-h"], ["docs", "-h"], ["config", "-h"], ["docs", "search", "-h"]):
        code, out, _ = run(sub, capsys)
        assert code == 0 and "xample" in out, sub


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["--port", "9000"], "--port applies only to --transport http"),
        (["--no-auth"], "--no-auth applies only to --transport http"),
        (["--transport", "http", "--port", "99999"], "port must be 0-65535"),
        (["--transport", "carrier-pigeon"], "invalid choice"),
        (["docs"], "required"),
        (["docs", "search", "nuclei", "--max", "0"], "expected a positive integer"),
        (["config", "init", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_usage_is_one_error_line_and_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, fragment)


# --- config ---------------------------------------------------------------------------------


def test_config_init_then_refuses_then_force(isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfile = isolated_dirs / "config.toml"
    code, out, _ = run(["config", "init"], capsys)
    assert code == 0 and str(cfile) in out
    assert cfile.read_text(encoding="utf-8") == render_example()
    cfile.write_text("[kernel]\nname = 'mine'\n", encoding="utf-8")
    code, _, err = run(["config", "init"], capsys)
    assert code == 2
    assert err == f"error: {cfile}: already exists; edit it, or rerun with --force to overwrite it with the defaults\n"
    assert cfile.read_text(encoding="utf-8") == "[kernel]\nname = 'mine'\n"
    code, _, _ = run(["config", "init", "--force"], capsys)
    assert code == 0 and cfile.read_text(encoding="utf-8") == render_example()


def test_config_init_in_an_unwritable_place_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "blocker").write_text("", encoding="utf-8")
    monkeypatch.setenv("BIOPB_CONFIG_DIR", str(tmp_path / "blocker" / "cfg"))
    code, _, err = run(["config", "init"], capsys)
    assert code == 2
    assert_one_error_line(err, "cannot write the config file")
    assert err.endswith("; set $BIOPB_CONFIG_DIR to a writable directory\n")


def test_config_show_gives_values_sources_and_alias_warning(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    isolated_dirs.mkdir()
    cfile = isolated_dirs / "config.toml"
    cfile.write_text("[services]\nskills_local_dir = 'lab'\n[http]\nport = 9001\n", encoding="utf-8")
    code, out, err = run(["config", "show"], capsys)
    assert code == 0
    assert f"# {cfile}:4" in out and "port = 9001" in out
    assert f"alias services.skills_local_dir ({cfile}:2)" in out
    assert str(isolated_dirs / "lab") in out
    assert err.startswith("warning: ") and "deprecated" in err


@pytest.mark.parametrize("argv", [[], ["--transport", "http"], ["config", "show"], ["docs", "index"]])
def test_broken_config_stops_every_command_with_file_line_key(
    isolated_dirs: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    isolated_dirs.mkdir()
    cfile = isolated_dirs / "config.toml"
    cfile.write_text("[kernel]\npromote_after = 'soon'\n", encoding="utf-8")
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, f"{cfile}:2:", "kernel.promote_after")


def test_unexpected_error_is_one_line_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(settings: object) -> str:
        raise ValueError("boom")

    monkeypatch.setattr(cli_config, "render_show", broken)  # the seam: the top-level handler itself
    code, _, err = run(["config", "show"], capsys)
    assert code == 2
    assert_one_error_line(err, "unexpected ValueError: boom", "BIOPB_DEBUG=1")
    monkeypatch.setenv("BIOPB_DEBUG", "1")
    with pytest.raises(ValueError, match="boom"):
        cli.main(["config", "show"])


# --- docs over the real store ---------------------------------------------------------------


def test_docs_index_read_and_missing_doc(isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["docs", "index"], capsys)
    assert code == 0 and "## References" in out and "authoring" in out
    assert not isolated_dirs.exists(), "reading docs must not create the config dir"
    code, out, _ = run(["docs", "read", "authoring"], capsys)
    assert code == 0 and "shipped" in out.splitlines()[0]
    code, out, err = run(["docs", "read", "authorin"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, "authoring")
    code, _, err = run(["docs", "read", "../etc/passwd"], capsys)
    assert code == 2
    assert_one_error_line(err)


def test_docs_restore_puts_a_version_back_and_history_keeps_the_replaced_text(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What @history tells a scientist to type works: the version comes back through the store's
    ordinary write, so the text it replaced is a version too and can itself be restored."""
    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.docs.store import DocStore

    store = DocStore(load_settings().docs_local_dir)
    store.write_doc("probe", body="# Probe\n\nfirst text\n")
    store.write_doc("probe", body="# Probe\n\nsecond text\n")
    code, out, _ = run(["docs", "read", "probe@history"], capsys)
    assert code == 0 and "restore one with biopb-mcp docs restore probe v<N>" in out, out
    assert "the agent's write_doc" not in out
    code, out, _ = run(["docs", "read", "probe@v1"], capsys)
    assert code == 0 and "Restore it with biopb-mcp docs restore probe v1." in out, out

    code, out, err = run(["docs", "restore", "probe", "v1"], capsys)
    assert code == 0, err
    assert "Restored 'probe' to v1" in out and "-second text" in out and "+first text" in out, out
    assert store.doc_text("probe")[0].endswith("first text\n")
    versions = store.history.versions("probe")
    assert [store.history.read("probe", v.n)[1].endswith("second text\n") for v in versions].count(True) == 1

    code, out, err = run(["docs", "restore", "probe", "v9"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, "No version 9 of 'probe'", "biopb-mcp docs read probe@history")
    code, out, err = run(["docs", "restore", "probe", "nine"], capsys)
    assert code == 2 and "v<N>" in err and store.doc_text("probe")[0].endswith("first text\n")


def test_docs_commands_follow_the_old_key_and_warn_about_it(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    isolated_dirs.mkdir()
    (isolated_dirs / "config.toml").write_text("[services]\nskills_local_dir = 'lab-docs'\n", encoding="utf-8")
    code, out, err = run(["docs", "index"], capsys)
    assert code == 0 and "## References" in out
    assert sorted(p.name for p in isolated_dirs.iterdir()) == ["config.toml"]
    assert next(line for line in err.splitlines() if "deprecated" in line).startswith("warning: ")


def test_docs_check_is_clean_then_reports_a_dangling_entry(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["docs", "check"], capsys)
    assert code == 0, out + err
    index = isolated_dirs / "docs" / "index.md"
    index.parent.mkdir(parents=True)
    index.write_text(
        (SHIPPED_DIR / "index.md").read_text(encoding="utf-8") + "\n- no-such-doc: when nothing exists\n",
        encoding="utf-8",
    )
    code, out, err = run(["docs", "check"], capsys)
    assert code == 1
    assert "no-such-doc" in out and "problem" in err


def test_docs_check_names_the_line_a_hand_made_doc_needs_in_the_index(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A local doc with no index entry is legal but never shown to the agent: a visible warning."""
    docs = isolated_dirs / "docs"
    docs.mkdir(parents=True)
    (docs / "deconvolve.md").write_text("# Deconvolve\n\nRichardson-Lucy on a widefield stack.\n", encoding="utf-8")
    code, out, err = run(["docs", "check"], capsys)
    assert code == 0, out + err
    warning = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "deconvolve" in warning[0]
    assert "'- deconvolve: Richardson-Lucy on a widefield stack.'" in warning[0]
    assert "1 warning(s)" in out.splitlines()[-1]
    index = docs / "index.md"
    index.write_text(
        (SHIPPED_DIR / "index.md").read_text(encoding="utf-8") + "\n- deconvolve: deconvolve a widefield stack\n",
        encoding="utf-8",
    )
    code, out, _ = run(["docs", "check"], capsys)
    assert code == 0 and "warning" not in out


@pytest.mark.parametrize(
    ("frontmatter", "fragment"),
    [
        ("description: [unclosed", "line 2: description: opens a '[' list"),
        ("title: 'half quoted", "line 2: title: opens a ' quote"),
        ("this is not a key", "line 2: 'this is not a key' is not 'key: value'"),
    ],
)
def test_docs_check_reports_a_broken_frontmatter_line_with_file_and_line(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str], frontmatter: str, fragment: str
) -> None:
    docs = isolated_dirs / "docs"
    docs.mkdir(parents=True)
    doc = docs / "deconvolve.md"
    doc.write_text(f"---\n{frontmatter}\n---\n# Deconvolve\n\nbody\n", encoding="utf-8")
    code, out, _ = run(["docs", "check"], capsys)
    assert code == 1
    problem = [line for line in out.splitlines() if fragment in line]
    assert len(problem) == 1 and str(doc) in problem[0], out


def test_docs_check_reports_a_frontmatter_block_that_never_closes(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = isolated_dirs / "docs"
    docs.mkdir(parents=True)
    (docs / "deconvolve.md").write_text("---\ndescription: x\n# Deconvolve\n", encoding="utf-8")
    code, out, _ = run(["docs", "check"], capsys)
    assert code == 1 and "never closed" in out


def test_read_only_docs_commands_leave_the_disk_as_it_was(
    isolated_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reading docs from a terminal creates no config dir, no docs/ and no manifest."""
    before = sorted(tmp_path.rglob("*"))
    for argv in (
        ["docs", "index"],
        ["docs", "read", "authoring"],
        ["docs", "read", "index@diff"],
        ["docs", "check"],
        ["docs", "search", "otsu"],
        ["docs", "pack"],
        ["config", "show"],
    ):
        code, _, err = run(argv, capsys)
        assert code == 0, (argv, err)
        assert sorted(tmp_path.rglob("*")) == before, argv


def test_docs_search_and_pack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["docs", "search", "checkpoint", "--max", "2"], capsys)
    assert code == 0 and "authoring" in out
    code, _, err = run(["docs", "search", "   "], capsys)
    assert code == 2
    assert_one_error_line(err)
    target = tmp_path / "pack.md"
    code, out, _ = run(["docs", "pack", "--out", str(target)], capsys)
    assert code == 0 and str(target) in out
    assert "authoring" in target.read_text(encoding="utf-8")
    code, _, err = run(["docs", "pack", "--out", str(tmp_path / "no" / "dir" / "p.md")], capsys)
    assert code == 2
    assert_one_error_line(err, "No such file or directory")


# --- the real console script ----------------------------------------------------------------


def script() -> str:
    found = shutil.which("biopb-mcp", path=str(Path(sys.executable).parent)) or shutil.which("biopb-mcp")
    assert found, "biopb-mcp is not on PATH: pip install -e ."
    return found


def test_console_script_help_and_config_show(isolated_dirs: Path) -> None:
    env = dict(os.environ)
    done = subprocess.run([script(), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and "biopb-mcp" in done.stdout and done.stderr == ""
    isolated_dirs.mkdir()
    cfile = isolated_dirs / "config.toml"
    cfile.write_text("[kernel]\nname = 'lab'\n", encoding="utf-8")
    done = subprocess.run([script(), "config", "show"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and 'name = "lab"' in done.stdout and f"# {cfile}:2" in done.stdout
    cfile.write_text("[kernel]\nname = \n", encoding="utf-8")
    done = subprocess.run([script()], capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert_one_error_line(done.stderr, f"{cfile}:2:", "invalid TOML")


@pytest.mark.parametrize(
    ("argv", "config", "fragment"),
    [
        (["--rotate-token"], "", "--rotate-token applies only to --transport http"),
        (["--transport", "http", "--no-auth", "--rotate-token"], "", "--rotate-token applies only"),
        (["--transport", "http", "--rotate-token"], '[http]\ntoken = "per-start"\n', 'http.token is "per-start"'),
    ],
)
def test_rotate_token_outside_a_stable_http_token_is_bad_usage(
    argv: list[str], config: str, fragment: str, isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if config:
        isolated_dirs.mkdir(parents=True, exist_ok=True)
        (isolated_dirs / "config.toml").write_text(config)
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, fragment)


def test_config_show_flags_a_kernel_name_with_no_installed_spec(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    isolated_dirs.mkdir()
    (isolated_dirs / "config.toml").write_text('[kernel]\nname = "nosuchkernel"\n', encoding="utf-8")
    code, out, err = run(["config", "show"], capsys)
    assert code == 0 and 'name = "nosuchkernel"' in out
    flagged = [line for line in err.splitlines() if "nosuchkernel" in line]
    from jupyter_client.kernelspec import KernelSpecManager

    known = ", ".join(sorted(KernelSpecManager().find_kernel_specs())) or "none installed"
    assert flagged == [
        f"warning: kernel.name = 'nosuchkernel' names no installed Jupyter kernel spec (available: {known}); "
        "start_kernel will fail until it does (see `jupyter kernelspec list`)"
    ]


def test_config_show_after_config_init_still_attributes_every_value_to_its_default(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["config", "init"], capsys)[0] == 0
    code, out, _ = run(["config", "show"], capsys)
    assert code == 0
    values = [line for line in out.splitlines() if " = " in line and not line.startswith("#")]
    assert values and all(line.endswith("# default") for line in values), out


def test_terminal_messages_name_the_command_not_the_agents_tool_call(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["docs", "read", "authorin"], capsys)
    assert code == 2
    assert_one_error_line(err, "biopb-mcp docs index lists the docs")
    assert "read_doc(" not in err and "write_doc(" not in err
    code, out, _ = run(["docs", "search", "zzqqxxnothing"], capsys)
    assert code == 0 and "biopb-mcp docs index" in out and "read_doc(" not in out
    code, out, _ = run(["docs", "search", "otsu", "--max", "1"], capsys)
    assert code == 0 and "biopb-mcp docs read <id>" in out.splitlines()[0]
    code, out, _ = run(["docs", "read", "authoring@diff"], capsys)
    assert code == 0 and out.startswith("authoring has no local copy: biopb-mcp docs read authoring returns")


def test_serving_stdio_on_a_terminal_says_what_it_is_on_stderr(tmp_path: Path) -> None:
    """Run by hand, the server would otherwise sit silent on a terminal that looks hung."""
    import pty
    import selectors

    env = {**os.environ, **isolated_vars(tmp_path)}
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "biopb_mcp"], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    os.close(slave)
    try:
        assert proc.stderr is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stderr, selectors.EVENT_READ)
        first = b""
        while b"\n" not in first and sel.select(timeout=30):
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            first += chunk
        line = first.decode().splitlines()[0] if first else ""
        assert line == cli.TTY_HINT
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        os.close(master)
