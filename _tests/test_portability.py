"""biopb-mcp imports, and its docs store works, where the POSIX-only modules are missing (Windows).

Windows lacks ``fcntl``, ``resource``, ``termios``, ``pty``, ``grp``, ``pwd`` and a set of ``os``
names. These tests run on Linux, so they take the modules away from our code: every import that
``biopb_mcp`` itself makes of one of them fails, as it would there (third-party code keeps them: it
takes its own Windows paths there, which Linux cannot show). The platform seam modules import
them lazily, in a function, with the portable path beside them.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "biopb_mcp"

POSIX_ONLY = ("fcntl", "resource", "termios", "pty", "tty", "grp", "pwd", "posix", "syslog", "crypt", "spwd")
"""Standard modules Windows does not have."""

POSIX_ONLY_OS = (
    "O_NOFOLLOW", "O_DIRECTORY", "O_CLOEXEC", "O_NONBLOCK", "fwalk", "getuid", "geteuid", "getgid",
    "killpg", "getpgid", "setsid", "fdatasync", "fchmod", "fchown", "pread", "pwrite", "pipe2",
)  # fmt: skip
"""``os`` names Windows does not have: module-level code must not touch them."""

SEAMS = {
    "biopb_mcp.fs.file_locks": {"fcntl", "msvcrt"},
    "biopb_mcp.fs.descriptors": {"fcntl", "resource"},
}
"""The modules that may import the OS-specific modules (inside functions, beside a portable path)."""

BLOCKER = f"""
import builtins
_real_import = builtins.__import__
def _without_posix(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {{}}).get("__name__") or ""
    if level == 0 and name.split(".")[0] in {POSIX_ONLY!r} and importer.split(".")[0] == "biopb_mcp":
        raise ModuleNotFoundError(f"No module named {{name!r}} (taken away: Windows has none)", name=name)
    return _real_import(name, globals, locals, fromlist, level)
builtins.__import__ = _without_posix
"""
"""Makes every import of a POSIX-only module by biopb_mcp's own code fail (cached ones included)."""

IMPORT_ALL = """
import importlib, json, pkgutil, biopb_mcp
RUN_AT_IMPORT = {"biopb_mcp.__main__", "biopb_mcp.kernel.inside.bootstrap"}  # checked statically instead
failed, done = [], []
for info in pkgutil.walk_packages(biopb_mcp.__path__, "biopb_mcp."):
    if info.name in RUN_AT_IMPORT:
        continue
    try:
        importlib.import_module(info.name)
        done.append(info.name)
    except Exception as exc:
        failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
print(json.dumps({"failed": failed, "done": done}))
"""


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out.append((name, ast.parse(path.read_text(encoding="utf-8"))))
    return out


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """Every node that runs when the module is imported: not inside a function body."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(getattr(node, "decorator_list", []))
            defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
            todo.extend(defaults)
            continue
        found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module.split(".")[0]]
    return []


def test_no_module_touches_a_posix_only_name_at_import() -> None:
    """Statically, so the modules that run on import (``__main__``, the kernel bootstrap) count too."""
    problems = []
    for name, tree in _modules():
        for node in _module_level(tree):
            for module in _imported(node):
                if module in POSIX_ONLY or module == "msvcrt":
                    problems.append(f"{name}: imports {module} at module level")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in POSIX_ONLY_OS
            ):
                problems.append(f"{name}:{node.lineno}: os.{node.attr} at module level")
    assert problems == []


def test_only_the_seam_modules_import_the_os_specific_modules() -> None:
    """Which modules may touch the OS-specific modules: the seams, each for its own concern."""
    problems = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            for module in _imported(node):
                if (module in POSIX_ONLY or module == "msvcrt") and module not in SEAMS.get(name, set()):
                    problems.append(f"{name}: imports {module}")
    assert problems == []


def _run(code: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def test_every_module_imports_without_the_posix_only_modules() -> None:
    done = _run(IMPORT_ALL)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failed"] == []
    assert len(report["done"]) > 100 and "biopb_mcp.server.transports.stdio" in report["done"]
    # and the blocker does block: a module of ours importing fcntl fails
    probe = _run("import types, sys\nm = types.ModuleType('biopb_mcp.probe')\nexec('import fcntl', m.__dict__)")
    assert probe.returncode != 0 and "taken away" in probe.stderr, probe.stderr


@pytest.mark.parametrize("tests", [["_tests/docs/test_store.py", "_tests/docs/test_history.py"]])
def test_the_docs_store_works_without_the_posix_only_modules(tests: list[str]) -> None:
    """Its write, read and history tests, with no fcntl: the tier lock takes its portable path."""
    done = _run(
        "import sys, pytest\nsys.exit(pytest.main(sys.argv[1:]))",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        "no:randomly",
        *tests,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-1000:]


def test_without_process_groups_the_kernel_process_itself_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where os has no process groups (Windows), the seam says so and the kernel's stop signals
    the process itself, as for a kernel that leads no group."""
    from biopb_mcp.fs import process_groups
    from biopb_mcp.kernel import lifeline

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        for name in ("getpgid", "getpgrp", "killpg"):
            monkeypatch.delattr(os, name)
        assert process_groups.group_of(proc.pid) is None and process_groups.own_group() is None
        lifeline.kill_group(proc, process_groups.group_of(proc.pid), grace=10.0)
        assert proc.poll() is not None
    finally:
        monkeypatch.undo()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_without_posix_signals_a_joined_local_kernel_is_interrupted_by_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On Windows ``os.kill`` with SIGINT terminates the process, and only the frontend that
    launched a kernel holds its interrupt event: a joined kernel on this machine is interrupted by
    an ``interrupt_request`` on control there, and its status says so."""
    import socket

    from _tests.support.isolation import make_settings
    from biopb_mcp.kernel.attached import AttachedKernel

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        joined = AttachedKernel(make_settings(tmp_path))
        joined.info = {"transport": "ipc", "ip": str(tmp_path / "kernel")}
        joined.identify([proc.pid, socket.gethostname()], "its-session")  # a local, live pid
        assert joined.pid == proc.pid
        requests: list[str] = []
        monkeypatch.setattr(os, "name", "nt")
        joined.interrupt(lambda: requests.append("interrupt_request"))
        status = joined.status()
        monkeypatch.undo()
        assert requests == ["interrupt_request"] and status["interrupt"] == "interrupt_request"
        with pytest.raises(subprocess.TimeoutExpired):  # not signalled: still running
            proc.wait(1.0)
    finally:
        monkeypatch.undo()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_where_libzmq_has_no_ipc_the_kernel_runs_on_loopback_tcp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Windows builds of libzmq may lack ipc://: the kernel's channels then use tcp on 127.0.0.1,
    with the connection file's key, and everything else is unchanged."""
    from _tests.support.isolation import make_settings
    from _tests.support.runner import finish
    from biopb_mcp.kernel import KernelHost, process
    from biopb_mcp.text.kernel import rendered_text

    monkeypatch.setattr(process, "kernel_transport", lambda: "tcp")
    host = KernelHost(make_settings(tmp_path))
    try:
        host.start()
        status = host.status()
        info = json.loads(Path(str(status.connection_file)).read_text(encoding="utf-8"))
        assert (info["transport"], info["ip"], status.transport) == ("tcp", "127.0.0.1", "tcp")
        _, result = finish(host, "print('over tcp', 6 * 7)")
        assert rendered_text(result) == "over tcp 42"
    finally:
        host.shutdown()
