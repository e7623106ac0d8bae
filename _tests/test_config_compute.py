"""[compute]: the cluster settings are validated at load, shown by `config show`, passed to the kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biopb_mcp.config.settings import Settings, load_settings, render_show
from biopb_mcp.errors import ConfigError
from biopb_mcp.kernel import compute
from biopb_mcp.kernel.env import compute_env


def load(tmp_path: Path, body: str) -> Settings:
    (tmp_path / "config.toml").write_text("[compute]\n" + body, encoding="utf-8")
    return load_settings(tmp_path)


def test_default_is_no_cluster(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings.compute.scheduler == "none"
    assert compute.mode(settings.compute.scheduler) == "none"


@pytest.mark.parametrize("scheduler", ["local", "tcp://10.0.0.5:8786", "tls://head.cluster:8786"])
def test_scheduler_accepts_local_and_addresses(tmp_path: Path, scheduler: str) -> None:
    settings = load(tmp_path, f'scheduler = "{scheduler}"\nworkers = 2\nmemory_limit = "512MiB"\n')
    assert settings.compute.scheduler == scheduler
    assert settings.compute.workers == 2 and settings.compute.memory_limit == "512MiB"
    shown = render_show(settings)
    assert f'scheduler = "{scheduler}"' in shown and "[compute]" in shown


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('scheduler = "localhost:8786"\n', ['"none", "local" or a scheduler address', "localhost:8786"]),
        ('scheduler = "Local"\n', ["compute.scheduler must be"]),
        ('memory_limit = "lots"\n', ['"auto" or a size such as "4GB"', "lots"]),
        ("workers = -1\n", ["compute.workers must be at least 0"]),
        ("connect_timeout = 0\n", ["compute.connect_timeout must be at least 0.1"]),
        ("threads = 2\n", ["unknown key compute.threads", "threads_per_worker"]),
    ],
)
def test_bad_compute_values_name_the_key_and_the_fix(tmp_path: Path, body: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as exc_info:
        load(tmp_path, body)
    text = str(exc_info.value)
    assert all(w in text for w in words), text
    assert "config.toml:2" in text


def test_kernel_env_carries_the_compute_settings_and_the_plugin(tmp_path: Path) -> None:
    settings = load(tmp_path, 'scheduler = "local"\nworkers = 3\nthreads_per_worker = 2\nconnect_timeout = 4.5\n')
    env = compute_env(settings)
    assert Path(env["BIOPB_MCP_BUILTIN_PLUGINS"]).is_file()
    config = json.loads(env["BIOPB_MCP_COMPUTE"])
    assert config == {
        "scheduler": "local",
        "workers": 3,
        "threads_per_worker": 2,
        "memory_limit": "auto",
        "connect_timeout": 4.5,
        "config_file": str(tmp_path / "config.toml"),
    }
