"""The sentences the domain's kinds and fields are worded into: the facts stay on the exception,
the advice is written here, once, for the agent (``for_agent``) or a terminal (``for_terminal``)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from biopb_mcp.config.settings import load_settings
from biopb_mcp.errors import (
    ConfigError,
    ConfigProblem,
    KernelNotReady,
    KernelProblem,
    UnsafeRuntimeDir,
)
from biopb_mcp.kernel import Execution, KernelState
from biopb_mcp.kernel.jobs import busy
from biopb_mcp.server.transports.http import http_token
from biopb_mcp.text.failures import for_agent, for_terminal
from biopb_mcp.text.kernel import lost_kernel


def test_a_decimal_mark_that_is_also_the_delimiter_is_told_the_delimiter_to_set(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[outputs]\ntable_delimiter = ","\ndecimal_mark = ","\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    said = f'{tmp_path / "config.toml"}:3: outputs.decimal_mark "," cannot also be the table delimiter'
    assert str(caught.value) == said and caught.value.kind is ConfigProblem.MARK_IS_DELIMITER
    assert (
        for_terminal(caught.value)
        == for_agent(caught.value)
        == f'{said}; with a decimal comma set table_delimiter = ";"'
    )


def test_a_busy_kernel_is_worded_from_its_job_and_seconds() -> None:
    ex = Execution("job-4", "code", "msg")
    ex.started -= 3.4
    refused = busy(ex)  # the host's facts; its message is a statement for logs
    assert refused.job_id == "job-4" and 3.4 <= refused.seconds < 3.5
    assert str(refused) == f"job-4 is running ({refused.seconds:.1f} s)"
    assert for_agent(refused) == (
        "Busy: code is already running (3 s). (job-4 is running: poll_job('job-4') to follow it, interrupt_kernel "
        "to stop it.)\n[job-4: running]"
    )


LOST = [
    (KernelState.ERROR, "no spec named 'x'.", "", "no spec named 'x'."),
    (
        KernelState.ERROR,
        "the kernel exited right after starting.",
        "boom",
        "the kernel exited right after starting.\nLast kernel log lines:\nboom",
    ),
    (
        KernelState.DEAD,
        "exit code 1",
        "last words",
        "The kernel died (exit code 1). Last kernel log lines:\nlast words\n",
    ),
    (
        KernelState.DEAD,
        "killed by signal SIGKILL",
        "",
        "The kernel died (killed by signal SIGKILL). Last kernel log lines:\n\n",
    ),
    (
        KernelState.GONE,
        "it was restarted by its frontend",
        "",
        "The joined kernel is gone: it was restarted by its frontend.",
    ),
    (KernelState.DEAD, "", "", ""),
    (KernelState.READY, "x", "y", ""),
]


@pytest.mark.parametrize(("state", "cause", "log_tail", "says"), LOST)
def test_why_the_kernel_is_lost_is_written_from_the_hosts_facts(
    state: KernelState, cause: str, log_tail: str, says: str
) -> None:
    """The sentence server_status shows as the kernel's message and a not-ready answer opens with."""
    assert lost_kernel(state, cause, log_tail) == says


def test_a_kernel_that_could_not_start_is_told_its_cause_log_setting_and_start_kernel() -> None:
    failed = KernelNotReady(
        "The kernel could not start: the kernel did not become ready within 5.0 s.",
        state="error",
        cause="the kernel did not become ready within 5.0 s.",
        log_tail="slow import",
        setting="kernel.startup_timeout",
        wanted="to more than 5.0 s if the machine is slow",
        config_file="/lab/config.toml",
    )
    assert for_agent(failed) == (
        "Kernel not ready (state: error). The kernel could not start: the kernel did not become ready within 5.0 s.\n"
        "Last kernel log lines:\nslow import Set kernel.startup_timeout in /lab/config.toml to more than 5.0 s if "
        "the machine is slow. Call start_kernel to try again."
    )


def test_a_dead_kernel_is_told_its_exit_its_log_and_that_the_namespace_is_lost() -> None:
    dead = KernelNotReady("The kernel died (exit code 1).", state="dead", cause="exit code 1", log_tail="boom")
    assert for_agent(dead) == (
        "Kernel not ready (state: dead). The kernel died (exit code 1). Last kernel log lines:\nboom\n Call "
        "start_kernel to start a fresh kernel (the namespace was lost)."
    )
    plain = KernelNotReady("The kernel is dead.", state="dead")  # no facts: the statement is quoted
    assert for_agent(plain) == "The kernel is dead. Call start_kernel to start a fresh kernel (the namespace was lost)."


def test_a_server_that_cannot_keep_its_token_is_told_the_key_to_set_or_the_other_choice(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "cfg")
    blocked = tmp_path / "blocker"
    blocked.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as unkept:
        http_token(replace(settings, state_dir=blocked / "state"))
    assert unkept.value.kind is ConfigProblem.TOKEN_UNKEPT
    assert str(unkept.value).startswith(f"cannot keep the HTTP token in {blocked / 'state'}: ")
    assert for_terminal(unkept.value) == (
        f"{unkept.value}; set server.state_dir in {settings.config_file} to a writable directory, or "
        'http.token = "per-start"'
    )
    with pytest.raises(ConfigError) as unwritable:
        http_token(replace(settings, runtime_dir=blocked / "rt"))
    assert unwritable.value.kind is ConfigProblem.TOKEN_FILE_UNWRITABLE
    assert str(unwritable.value).startswith(f"cannot write the HTTP token file in {blocked / 'rt'}: ")
    assert for_terminal(unwritable.value) == (
        f"{unwritable.value}; set server.runtime_dir in {settings.config_file} to a writable directory (or use "
        "--no-auth)"
    )


UNSAFE_STATEMENT = (
    "/run/shared/biopb-mcp-7 exists but is not a private directory of this user (a link, another owner, or open "
    "to group/others)"
)


def _unsafe() -> UnsafeRuntimeDir:
    return UnsafeRuntimeDir(UNSAFE_STATEMENT, path="/run/shared/biopb-mcp-7", runtime_dir="/run/shared")


def test_the_token_file_error_keeps_the_runtime_dirs_refusal_as_a_fact(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "cfg")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / f"biopb-mcp-{os.getuid()}").mkdir(mode=0o755)
    with pytest.raises(ConfigError) as caught:
        http_token(replace(settings, runtime_dir=shared, http=replace(settings.http, token="per-start")))
    refused = caught.value.details["refused"]
    assert caught.value.kind is ConfigProblem.TOKEN_FILE_UNWRITABLE and isinstance(refused, UnsafeRuntimeDir)
    assert str(caught.value) == f"cannot write the HTTP token file in {shared}: {refused}"
    assert for_terminal(caught.value).startswith(
        f"cannot write the HTTP token file in {shared}: {refused}; remove it, or point server.runtime_dir at "
    )


def test_a_runtime_dir_that_is_not_private_is_told_the_way_past_it_on_every_path() -> None:
    """Moved from fs.runtime's message: the terminal and the magics (for_terminal), the HTTP token
    file's error line and a failed start read the same two ways past it."""
    way = "; remove it, or point server.runtime_dir at a private directory"
    assert for_terminal(_unsafe()) == for_agent(_unsafe()) == UNSAFE_STATEMENT + way
    token = ConfigError(
        f"cannot write the HTTP token file in /run/shared: {UNSAFE_STATEMENT}",
        key="server.runtime_dir",
        kind=ConfigProblem.TOKEN_FILE_UNWRITABLE,
        config_file="/lab/config.toml",
        refused=_unsafe(),
    )
    assert for_terminal(token) == (
        f"cannot write the HTTP token file in /run/shared: {UNSAFE_STATEMENT}{way}; set server.runtime_dir in "
        "/lab/config.toml to a writable directory (or use --no-auth)"
    )
    said = f"cannot use the runtime dir /run/shared ({UNSAFE_STATEMENT}{way})."
    facts = {"runtime_dir": "/run/shared", "refused": _unsafe()}
    cause = f"cannot use the runtime dir /run/shared ({UNSAFE_STATEMENT})."
    assert lost_kernel(KernelState.ERROR, cause, "", KernelProblem.RUNTIME_DIR_UNSAFE, facts) == said


def test_a_start_question_left_unanswered_asks_whether_a_cell_still_runs() -> None:
    """Moved from kernel.probes' message: the hint is written here from the seconds waited."""
    cause = "the kernel did not answer within 4 s."
    hinted = "the kernel did not answer within 4 s (is a cell still running in its notebook?)."
    facts = {"seconds": 4.2}
    assert lost_kernel(KernelState.ERROR, cause, "", KernelProblem.NO_ANSWER_AT_START, facts) == hinted
    failed = KernelNotReady(
        f"The kernel could not start: {cause}",
        state="error",
        cause=cause,
        kind=KernelProblem.NO_ANSWER_AT_START,
        seconds=4.2,
    )
    assert (
        for_agent(failed)
        == f"Kernel not ready (state: error). The kernel could not start: {hinted} Call start_kernel to try again."
    )
    assert (
        lost_kernel(KernelState.ERROR, cause, "boom", KernelProblem.OTHER, facts)
        == f"{cause}\nLast kernel log lines:\nboom"
    )
