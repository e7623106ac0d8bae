"""The biopb-mcp command: main(argv) for each command, and the real console script as a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import biopb_mcp
from biopb_mcp import cli
from biopb_mcp.config import render_example


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
    assert_one_error_line(err, str(cfile), "--force")
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
    assert_one_error_line(err, "cannot write the config file", "BIOPB_CONFIG_DIR")


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

    monkeypatch.setattr(cli, "render_show", broken)  # the seam: the top-level handler itself
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
    assert (isolated_dirs / "docs" / "index.md").is_file(), "first access seeds the local index"
    code, out, _ = run(["docs", "read", "authoring"], capsys)
    assert code == 0 and "shipped" in out.splitlines()[0]
    code, out, err = run(["docs", "read", "authorin"], capsys)
    assert code == 2 and out == ""
    assert_one_error_line(err, "authoring")
    code, _, err = run(["docs", "read", "../etc/passwd"], capsys)
    assert code == 2
    assert_one_error_line(err)


def test_docs_commands_follow_the_old_key_and_warn_about_it(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    isolated_dirs.mkdir()
    (isolated_dirs / "config.toml").write_text("[services]\nskills_local_dir = 'lab-docs'\n", encoding="utf-8")
    code, out, err = run(["docs", "index"], capsys)
    assert code == 0 and "## References" in out
    assert (isolated_dirs / "lab-docs" / "index.md").is_file()
    assert not (isolated_dirs / "docs").exists()
    assert [line for line in err.splitlines() if "deprecated" in line][0].startswith("warning: ")


def test_docs_check_is_clean_then_reports_a_dangling_entry(
    isolated_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["docs", "check"], capsys)
    assert code == 0, out + err
    index = isolated_dirs / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\n- no-such-doc: when nothing exists\n",
                     encoding="utf-8")
    code, out, err = run(["docs", "check"], capsys)
    assert code == 1
    assert "no-such-doc" in out and "problem" in err


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
    done = subprocess.run([script()], capture_output=True, text=True, env=env, timeout=60,
                          stdin=subprocess.DEVNULL)
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
