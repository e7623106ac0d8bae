"""The sentences the domain's kinds and fields are worded into: the facts stay on the exception,
the advice is written here, once, for the agent (``for_agent``) or a terminal (``for_terminal``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from biopb_mcp.config.settings import load_settings
from biopb_mcp.errors import ConfigError, ConfigProblem, KernelBusy, KernelNotReady
from biopb_mcp.kernel import KernelState
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
    busy = KernelBusy("Busy: code is already running (3 s).", job_id="job-4", seconds=3.4)
    assert for_agent(busy) == (
        "Busy: code is already running (3 s). (job-4 is running: poll_job('job-4') to follow it, interrupt_kernel "
        "to stop it.)\n[job-4: running]"
    )
    assert str(busy) in for_agent(busy)  # the host's statement (as jobs.busy words it) stays whole in the answer


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
