"""Config: schema defaults, example file, deep merge, alias, env override, every error kind, logging."""

from __future__ import annotations

import logging
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest

from biopb_mcp.cli.config import init_config
from biopb_mcp.config.settings import (
    ALIASES,
    CONFIG_DIR_ENV,
    SCHEMA,
    SECTIONS,
    ConfigWarning,
    Key,
    Settings,
    WarningKind,
    config_dir,
    defaults,
    load_settings,
    render_example,
    render_show,
)
from biopb_mcp.errors import ConfigError, ConfigProblem
from biopb_mcp.server.logs import setup_logging
from biopb_mcp.text.config import config_warning
from biopb_mcp.text.failures import for_terminal

REPO = Path(__file__).resolve().parents[1]


def write_config(cdir: Path, text: str) -> Path:
    cdir.mkdir(parents=True, exist_ok=True)
    cfile = cdir / "config.toml"
    cfile.write_text(text, encoding="utf-8")
    return cfile


def load_error(cdir: Path, text: str) -> tuple[ConfigError, Path]:
    cfile = write_config(cdir, text)
    with pytest.raises(ConfigError) as info:
        load_settings(cdir)
    return info.value, cfile


def settings_value(settings: Settings, key: Key) -> Any:
    return getattr(getattr(settings, key.section), key.name)


# --- defaults and the example file ----------------------------------------------------------


def test_missing_file_gives_schema_defaults_and_paths_inside_the_tree(tmp_path: Path) -> None:
    cdir = tmp_path / "config"
    s = load_settings(cdir)
    for key in SCHEMA:
        if key.section in ("kernel", "docs", "http", "server") and key.dotted not in (
            "server.state_dir",
            "server.runtime_dir",
            "server.log_file",
            "server.trace",
        ):
            assert settings_value(s, key) == key.default, key.dotted
    assert s.config_file == cdir / "config.toml"
    assert s.docs_local_dir == cdir / "docs"
    assert s.plugins_dir == cdir / "kernel"
    assert s.state_dir == cdir / "state"  # a tree of its own, not XDG_STATE_HOME's
    assert s.runtime_dir == cdir / "run"
    assert s.log_file == s.state_dir / "server.log"
    assert s.kernel_log_file == s.state_dir / "kernel.log"
    assert s.trace_file is None
    assert set(s.sources) == {k.dotted for k in SCHEMA}
    assert set(s.sources.values()) == {"default"}
    assert s.warnings == []
    assert not cdir.exists(), "loading must not create anything"


def test_example_file_is_the_schema_rendering_and_loads_to_the_defaults() -> None:
    text = (REPO / "config.example.toml").read_text(encoding="utf-8")
    assert text == render_example(), "regenerate config.example.toml from biopb_mcp.config.settings.render_example()"
    assert tomllib.loads(text) == {section: {} for section in SECTIONS}, "as written it sets nothing"
    lines = text.splitlines()
    for key in SCHEMA:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"# {key.name} = "))
        assert lines[at - 1].startswith("# ") and len(lines[at - 1]) > 10, f"{key.dotted} needs a comment"
    uncommented = "\n".join(
        line[2:] if any(line.startswith(f"# {k.name} = ") for k in SCHEMA) else line for line in lines
    )
    assert tomllib.loads(uncommented) == defaults()


def test_example_file_loaded_as_config_equals_a_missing_config(tmp_path: Path) -> None:
    write_config(tmp_path / "a", (REPO / "config.example.toml").read_text(encoding="utf-8"))
    from_example, missing = load_settings(tmp_path / "a"), load_settings(tmp_path / "b")
    for key in SCHEMA:  # `config show` keeps saying default after `config init`
        assert from_example.sources[key.dotted] == "default"
    assert from_example.kernel == missing.kernel
    assert from_example.http == missing.http
    assert from_example.docs == missing.docs
    assert from_example.server == missing.server
    assert from_example.docs_local_dir == tmp_path / "a" / "docs"
    assert from_example.log_file.relative_to(tmp_path / "a") == missing.log_file.relative_to(tmp_path / "b")
    assert from_example.trace_file is None


def test_init_writes_the_example_and_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    cdir = tmp_path / "new" / "config"
    path = init_config(cdir)
    assert path.read_text(encoding="utf-8") == render_example()
    assert stat.S_IMODE(cdir.stat().st_mode) == 0o700
    path.write_text("[kernel]\nname = 'mine'\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        init_config(cdir)
    assert str(info.value) == f"{path}: already exists" and info.value.kind is ConfigProblem.FILE_EXISTS
    assert path.read_text(encoding="utf-8") == "[kernel]\nname = 'mine'\n"
    init_config(cdir, force=True)
    assert path.read_text(encoding="utf-8") == render_example()
    assert sorted(p.name for p in cdir.iterdir()) == ["config.toml"], "no temp file left behind"


# --- merge, paths, alias, env -----------------------------------------------------------------


def test_partial_section_overrides_only_its_keys_and_records_the_line(tmp_path: Path) -> None:
    cfile = write_config(
        tmp_path, "# lab settings\n[kernel]\npromote_after = 2\n\n[http]\nallowed_hosts = ['lab-pc']\n"
    )
    s = load_settings(tmp_path)
    assert s.kernel.promote_after == 2.0 and isinstance(s.kernel.promote_after, float)
    assert s.kernel.max_output_chars == 20000 and s.kernel.name == ""
    assert s.http.allowed_hosts == ["lab-pc"] and s.http.port == 8765 and s.http.auth is True
    assert s.sources["kernel.promote_after"] == f"{cfile}:3"
    assert s.sources["http.allowed_hosts"] == f"{cfile}:6"
    assert s.sources["kernel.name"] == "default"


def test_path_keys_expand_home_and_resolve_relative_to_the_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cdir = tmp_path / "cfg"
    write_config(
        cdir, "[services]\ndocs_local_dir = '~/lab-docs'\n[server]\nstate_dir = 'state'\ntrace = '/abs/trace.jsonl'\n"
    )
    s = load_settings(cdir)
    assert s.docs_local_dir == tmp_path / "home" / "lab-docs"
    assert s.state_dir == cdir / "state"
    assert s.log_file == cdir / "state" / "server.log"
    assert s.kernel_log_file == cdir / "state" / "kernel.log"
    assert s.trace_file == Path("/abs/trace.jsonl")


def test_old_skills_key_is_an_alias_with_a_deprecation_warning(tmp_path: Path) -> None:
    cfile = write_config(tmp_path, "[services]\nskills_local_dir = 'old-docs'\n")
    s = load_settings(tmp_path)
    assert s.docs_local_dir == tmp_path / "old-docs"
    assert s.sources["services.docs_local_dir"] == f"alias services.skills_local_dir ({cfile}:2)"
    old, new = "services.skills_local_dir", "services.docs_local_dir"
    assert s.warnings == [ConfigWarning(WarningKind.ALIAS_USED, f"{cfile}:2", {"old": old, "new": new})]
    assert config_warning(s.warnings[0]) == (  # the rename to make is text/'s
        f"{cfile}:2: services.skills_local_dir is deprecated and will stop working in the next release; rename it "
        "to docs_local_dir (same value)"
    )


def test_new_docs_key_wins_over_the_alias_and_says_the_old_one_is_ignored(tmp_path: Path) -> None:
    cfile = write_config(tmp_path, "[services]\nskills_local_dir = 'old'\ndocs_local_dir = 'new'\n")
    s = load_settings(tmp_path)
    assert s.docs_local_dir == tmp_path / "new"
    assert s.sources["services.docs_local_dir"] == f"{cfile}:3"
    facts = {"old": "services.skills_local_dir", "new": "services.docs_local_dir", "source": f"{cfile}:3"}
    assert s.warnings == [ConfigWarning(WarningKind.ALIAS_IGNORED, f"{cfile}:2", facts)]
    assert config_warning(s.warnings[0]) == (
        f"{cfile}:2: services.skills_local_dir is deprecated and ignored because services.docs_local_dir is also "
        f"set ({cfile}:3); delete the services.skills_local_dir line"
    )
    assert set(ALIASES) == {"services.skills_local_dir"}


def test_alias_with_a_wrong_type_is_refused_naming_the_old_key(tmp_path: Path) -> None:
    err, cfile = load_error(tmp_path, "[services]\nskills_local_dir = 3\n")
    assert err.key == "services.skills_local_dir" and err.line == 2
    assert str(err).startswith(f"{cfile}:2: services.skills_local_dir must be a string")


def test_env_var_moves_the_whole_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    moved = tmp_path / "elsewhere"
    monkeypatch.setenv(CONFIG_DIR_ENV, str(moved))
    write_config(moved, "[docs]\nhistory_keep = 7\n")
    assert config_dir() == moved
    s = load_settings()
    assert s.config_dir == moved and s.docs.history_keep == 7
    assert s.docs_local_dir == moved / "docs" and s.plugins_dir == moved / "kernel"
    assert f"{CONFIG_DIR_ENV}" in render_show(s)


def test_a_config_dir_from_the_env_keeps_its_state_and_runtime_files_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two trees on one machine share no search index, token, notebooks or kernel files."""
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path / "tree"))
    s = load_settings()
    assert s.state_dir == tmp_path / "tree" / "state" and s.runtime_dir == tmp_path / "tree" / "run"
    assert s.record.dir == s.state_dir / "notebooks"
    assert s.search_db.parent == s.log_file.parent == s.state_dir
    shown = render_show(s)
    assert f"state_dir        {tmp_path / 'tree' / 'state'}" in shown
    assert f"runtime_dir      {tmp_path / 'tree' / 'run'}" in shown


def test_a_tree_whose_config_moves_state_and_runtime_uses_those(tmp_path: Path) -> None:
    write_config(tmp_path, f'[server]\nstate_dir = "{tmp_path / "s"}"\nruntime_dir = "rt"\n')
    s = load_settings(tmp_path)
    assert s.state_dir == tmp_path / "s" and s.runtime_dir == tmp_path / "rt"


def test_the_platform_config_dir_keeps_the_platform_state_and_runtime_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONFIG_DIR_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    s = load_settings()
    assert s.config_dir == tmp_path / "xdg" / "biopb"
    assert s.state_dir == tmp_path / "state" / "biopb"  # XDG_STATE_HOME from conftest
    assert s.runtime_dir == tmp_path / "runtime" / "biopb"


def test_without_the_env_var_the_platform_config_dir_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_DIR_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_dir() == tmp_path / "xdg" / "biopb"


def test_show_prints_every_key_with_its_source_and_is_valid_toml(tmp_path: Path) -> None:
    cfile = write_config(tmp_path, "[kernel]\nname = 'lab-env'\n")
    text = render_show(load_settings(tmp_path))
    assert 'name = "lab-env"' in text and f"# {cfile}:2" in text
    parsed = tomllib.loads(text)
    assert parsed["kernel"]["name"] == "lab-env"
    assert {f"{s}.{k}" for s, body in parsed.items() for k in body} == {k.dotted for k in SCHEMA}
    assert "docs_local_dir" in text.split("# resolved paths")[1]


# --- errors: file, line and key in one message ------------------------------------------------


def test_toml_syntax_error_names_file_line_and_key(tmp_path: Path) -> None:
    err, cfile = load_error(tmp_path, "[kernel]\nname = 'x'\npromote_after = 10 s\n")
    assert err.line == 3 and err.key == "promote_after"
    assert str(err).startswith(f"{cfile}:3: invalid TOML (key promote_after)")


def test_toml_syntax_error_without_a_key_still_names_file_and_line(tmp_path: Path) -> None:
    err, cfile = load_error(tmp_path, "[kernel\n")
    assert err.line == 1 and str(err).startswith(f"{cfile}:1: invalid TOML")


def test_unknown_section_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    err, cfile = load_error(tmp_path, "[kernel]\nname = ''\n\n[kernal]\nname = 'x'\n")
    assert err.line == 4 and err.key == "kernal"
    assert str(err).startswith(f"{cfile}:4: unknown section [kernal] (did you mean kernel?)")


def test_a_key_outside_any_section_is_called_that_with_its_section_and_the_sections(tmp_path: Path) -> None:
    err, cfile = load_error(tmp_path, '# top\nname = "x"\n[kernel]\n')
    assert err.line == 2 and err.key == "name"
    text = str(err)
    assert text.startswith(f"{cfile}:2: name is a key outside any section"), text
    assert "unknown section" not in text and "a key of [kernel]" in text
    assert "[services], [server], [kernel]" in text
    err, _ = load_error(tmp_path, "promote_aftr = 3\n")
    assert "did you mean [kernel] promote_after?" in str(err)


def test_unknown_key_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    err, cfile = load_error(tmp_path, "[http]\nport = 9000\nalowed_hosts = []\n")
    assert err.line == 3 and err.key == "http.alowed_hosts"
    assert str(err).startswith(f"{cfile}:3: unknown key http.alowed_hosts (did you mean allowed_hosts?)")


def test_unknown_dotted_key_at_top_level_is_located(tmp_path: Path) -> None:
    err, _ = load_error(tmp_path, "# x\nkernel.nmae = 'py'\n")
    assert err.line == 2 and err.key == "kernel.nmae"


def test_section_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    err, _ = load_error(tmp_path, "kernel = 'python3'\n")
    assert err.line == 1 and err.key == "kernel" and "must be a table" in str(err)


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("# inline\nkernel = {name = 3}\n", "kernel.name"),
        ("# array of tables\n[[kernel]]\nname = 'a'\n", "kernel"),
    ],
)
def test_an_error_inside_an_inline_table_or_array_of_tables_still_names_a_line(
    tmp_path: Path, body: str, key: str
) -> None:
    err, _ = load_error(tmp_path, body)
    assert err.key == key and err.line == 2, str(err)


def test_a_key_is_located_by_toml_structure_not_by_text_that_looks_like_one(tmp_path: Path) -> None:
    # a multi-line string may hold "key = value" lines; the bad value is on the real key's line
    err, _ = load_error(tmp_path, '[kernel]\nname = """\npromote_after = 1\n"""\n"promote_after" = "x"\n')
    assert (err.line, err.key) == (5, "kernel.promote_after"), str(err)


_WRONG: dict[str, list[Any]] = {
    "str": [5, True, ["a"]],
    "int": ["5", 5.5, True],
    "float": ["ten", True, [1.0]],
    "bool": ["yes", 1],
    "list[str]": ["localhost", [1], [True]],
}


@pytest.mark.parametrize("key", SCHEMA, ids=lambda k: k.dotted)
def test_every_key_with_a_wrong_type_is_one_clear_error(tmp_path: Path, key: Key) -> None:
    import tomli_w

    for n, bad in enumerate(_WRONG[key.type]):
        cdir = tmp_path / str(n)
        value_line = tomli_w.dumps({key.name: bad}).strip()
        err, cfile = load_error(cdir, f"# comment\n[{key.section}]\n{value_line}\n")
        assert (err.path, err.line, err.key) == (cfile, 3, key.dotted)
        assert str(err).startswith(f"{cfile}:3: {key.dotted} must be ")
        assert "e.g. " in str(err), "the message shows a valid value"
        assert "\n" not in str(err)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[server]\nlog_level = 'LOUD'\n", "server.log_level must be one of DEBUG, INFO"),
        ("[http]\nport = -1\n", "http.port must be at least 0"),
        ("[http]\nport = 70000\n", "http.port must be at most 65535"),
        ("[kernel]\nstartup_timeout = 0\n", "kernel.startup_timeout must be at least 0.1"),
        ("[docs]\nhistory_keep = 0\n", "docs.history_keep must be at least 1"),
        # nan never compares, so promote_after = nan would never promote; inf and huge timeouts
        # overflow a lock's timeout, so start_kernel would crash instead of starting
        ("[kernel]\npromote_after = nan\n", "kernel.promote_after must be a finite number"),
        ("[kernel]\nstartup_timeout = inf\n", "kernel.startup_timeout must be a finite number"),
        ("[kernel]\nrequest_timeout = 1e300\n", "kernel.request_timeout must be a finite number"),
    ],
)
def test_out_of_range_values_are_refused(tmp_path: Path, body: str, expected: str) -> None:
    err, _ = load_error(tmp_path, body)
    assert err.line == 2 and expected in str(err)


def test_non_utf8_config_names_the_file_and_line(tmp_path: Path) -> None:
    tmp_path.joinpath("config.toml").write_bytes(b"[kernel]\nname = '\xff'\n")
    with pytest.raises(ConfigError, match="not UTF-8") as info:
        load_settings(tmp_path)
    assert info.value.line == 2


def test_config_file_that_is_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        load_settings(tmp_path)


# --- a config dir that cannot be used ---------------------------------------------------------
# A regular file where a directory must be: refused even for root, unlike chmod 000.


def test_config_dir_under_a_regular_file_cannot_be_loaded_or_initialised(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a dir", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a directory"):
        load_settings(blocker / "cfg")
    with pytest.raises(ConfigError, match="cannot write the config file") as info:
        init_config(blocker / "cfg")
    assert str(blocker / "cfg" / "config.toml") in str(info.value)
    assert info.value.kind is ConfigProblem.FILE_UNWRITABLE  # where to point the config dir is text/'s
    assert blocker.read_text(encoding="utf-8") == "not a dir"


def test_unwritable_log_location_is_a_config_error_naming_the_keys(tmp_path: Path, root_handlers: None) -> None:
    (tmp_path / "blocker").write_text("", encoding="utf-8")
    write_config(tmp_path / "cfg", f"[server]\nstate_dir = '{tmp_path / 'blocker' / 'state'}'\n")
    settings = load_settings(tmp_path / "cfg")
    with pytest.raises(ConfigError) as info:
        setup_logging(settings, stderr=False)
    assert str(info.value).startswith(f"cannot write the log file {settings.log_file}: ")
    assert info.value.kind is ConfigProblem.LOG_UNWRITABLE and info.value.key == "server.log_file"
    assert for_terminal(info.value) == (  # the keys that move it are text/'s
        f"{info.value}; set server.log_file or server.state_dir in {settings.config_file} to a writable place"
    )


def test_logging_goes_to_a_private_file_and_stderr_never_stdout(
    tmp_path: Path, root_handlers: None, capfd: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path / "cfg", "[services]\nskills_local_dir = 'old'\n[server]\nlog_level = 'DEBUG'\n")
    settings = load_settings(tmp_path / "cfg")
    setup_logging(settings, stderr=True)
    setup_logging(settings, stderr=True)  # idempotent: handlers replaced, not stacked
    logging.getLogger("biopb_mcp.test").debug("hello from the test")
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("hello from the test") == 1
    text = settings.log_file.read_text(encoding="utf-8")
    assert text.count("hello from the test") == 1
    assert "skills_local_dir is deprecated" in text
    assert stat.S_IMODE(settings.log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.log_file.parent.stat().st_mode) == 0o700
