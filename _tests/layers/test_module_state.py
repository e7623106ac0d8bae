"""No hidden state: no module of the server holds a cache, a lock or a thread in a module global.

State lives in an object its owner creates and passes along (``AppState``, ``KernelHost``, the
``DocStore``), or, where the process is the truth, in one typed registry instance whose class says
why (the tier locks, the file locks, the image folders). Read with ``ast``: a module-level
assignment of an empty container, a lock, a thread-local or a thread, or of an instance of a
module-private class, is state no owner holds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import biopb_mcp
from biopb_mcp.fs.atomic import TIER_LOCKS, TierLocks
from biopb_mcp.fs.file_locks import FILE_LOCKS, FileLocks
from biopb_mcp.kernel.host import LIVE_HOSTS, LiveHosts
from biopb_mcp.kernel.image_files import IMAGE_FOLDERS, ImageFolders

PACKAGE = Path(biopb_mcp.__file__).parent

PER_KERNEL_PROCESS = PACKAGE / "kernel" / "inside"
"""Runs inside the kernel, loaded once per kernel process: its module state is the kernel's."""

STATEFUL_CALLS = frozenset(
    {
        "dict",
        "list",
        "set",
        "OrderedDict",
        "defaultdict",
        "deque",
        "Counter",
        "Lock",
        "RLock",
        "Condition",
        "Event",
        "Semaphore",
        "BoundedSemaphore",
        "local",
        "Thread",
        "Timer",
        "WeakKeyDictionary",
        "WeakValueDictionary",
        "WeakSet",
        "Queue",
        "SimpleQueue",
        "ThreadPoolExecutor",
    }
)

PENDING: dict[str, set[str]] = {}
"""Module state known and not yet moved to an owner: none (the docs' read caches are the store's)."""


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _holds_state(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict):
        return not value.keys
    if isinstance(value, ast.List | ast.Set):
        return not value.elts
    if isinstance(value, ast.Call):
        name = _callee(value.func)
        return name in STATEFUL_CALLS or (name.startswith("_") and name[1:2].isupper())
    return False


def _module_state(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _holds_state(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(ast.unparse(target) for target in targets)
    return found


def test_no_module_global_holds_a_cache_a_lock_or_a_thread() -> None:
    problems: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_docs_data" in path.parts or PER_KERNEL_PROCESS in path.parents:
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        names = _module_state(path) - PENDING.get(rel, set())
        if names:
            problems[rel] = sorted(names)
    assert problems == {}


def test_the_scan_sees_module_state(tmp_path: Path) -> None:
    """The check above would see each shape it looks for (so an empty answer means something)."""
    module = tmp_path / "module.py"
    module.write_text(
        "import threading\n_a = {}\n_b: list[int] = []\n_c = threading.Lock()\n_d = threading.local()\n"
        "_e = _Writer()\nCONSTANT = {'k': 1}\nLIMIT = 3\nREGISTRY = Registry()\n",
        encoding="utf-8",
    )
    assert _module_state(module) == {"_a", "_b", "_c", "_d", "_e"}


def test_each_process_wide_registry_is_one_typed_instance_that_says_why() -> None:
    for registry, cls in (
        (TIER_LOCKS, TierLocks),
        (FILE_LOCKS, FileLocks),
        (IMAGE_FOLDERS, ImageFolders),
        (LIVE_HOSTS, LiveHosts),
    ):
        assert type(registry) is cls
        assert cls.__doc__ is not None and "Process-wide" in cls.__doc__
