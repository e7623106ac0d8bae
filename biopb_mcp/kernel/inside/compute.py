"""Dask in the kernel: ``dask_client()``, a lazily created ``distributed.Client``.

Loaded by the kernel bootstrap from this file's path (the kernel may be another Python without
biopb_mcp), so it imports only the standard library until first use: with ``[compute]
scheduler = "none"`` a kernel start pays nothing for it. The host passes the ``[compute]``
settings as JSON in ``BIOPB_MCP_COMPUTE``.

A local cluster runs inside the kernel's process group (the scheduler in a thread of the kernel,
workers as its child processes), so killing the group on restart or server death ends it too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from typing import Any

CONFIG_ENV = "BIOPB_MCP_COMPUTE"
"""Named in the server's ``biopb_mcp.kernel.env`` (the kernel's environment contract), which sets it."""

_WORKER_PRELOAD = (
    "import signal\n"
    "# interrupt_kernel signals the kernel's whole process group; a worker must survive it\n"
    "try:\n"
    "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "except ValueError:\n"
    "    pass\n"
)
"""Run in each local worker process at start (a preload given as script text)."""

_lock = threading.Lock()
_state: dict[str, Any] = {"client": None, "cluster": None, "error": ""}
_config: dict[str, Any] = {
    "scheduler": "none",
    "workers": 0,
    "threads_per_worker": 0,
    "memory_limit": "auto",
    "connect_timeout": 10.0,
    "config_file": "",
}


class ComputeUnavailable(RuntimeError):
    """No cluster is configured, or the configured one could not be reached or started."""


def dask_client() -> Any:
    """The session's ``distributed.Client``; the first call connects or starts the cluster.

    Once it exists, dask computations in this kernel (``.compute()``, ``dask.compute``,
    ``to_zarr``) run on the cluster. ``[compute] scheduler`` in the server's config decides
    where: "local" starts a LocalCluster of worker processes owned by this kernel (they end with
    it); an address such as "tcp://host:8786" attaches to an existing scheduler.

    Raises:
        ComputeUnavailable: no cluster is configured (``scheduler = "none"``: dask then runs in
            this process's threads), or the scheduler did not answer in time.
    """
    with _lock:
        client = _state["client"]
        if client is not None and client.status in ("running", "connecting", "newly-created"):
            return client
        mode = _config["scheduler"]
        where = _config.get("config_file") or "the server's config.toml"
        if mode == "none":
            raise ComputeUnavailable(
                'No cluster is configured ([compute] scheduler = "none"): dask computations run in '
                "threads of this kernel process, which is fine for data that fits in memory. For "
                'more, ask the user to set [compute] scheduler = "local" (or a scheduler address '
                f'such as "tcp://host:8786") in {where}; it applies after restart_kernel.'
            )
        _state["client"] = client = _connect(mode, where)
        _state["error"] = ""
        return client


def _connect(mode: str, where: str) -> Any:
    import logging

    from distributed import Client, LocalCluster

    timeout = float(_config["connect_timeout"])
    if mode == "local":
        try:
            cluster = LocalCluster(
                n_workers=_config["workers"] or None,
                threads_per_worker=_config["threads_per_worker"] or None,
                memory_limit=_config["memory_limit"],
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",  # a free port: several kernels may run at once
                silence_logs=logging.ERROR,
                preload=[_WORKER_PRELOAD],
            )
        except Exception as exc:
            _state["error"] = f"{type(exc).__name__}: {exc}"
            raise ComputeUnavailable(
                f"The local dask cluster did not start ({_state['error']}). Check the [compute] "
                f"sizes in {where} (workers, threads_per_worker, memory_limit)."
            ) from exc
        _state["cluster"] = cluster
        return _quiet(Client(cluster, timeout=timeout))
    try:
        return _quiet(Client(mode, timeout=timeout))
    except (OSError, TimeoutError) as exc:
        _state["error"] = f"{type(exc).__name__}: {exc}"
        raise ComputeUnavailable(
            f"The dask scheduler at {mode} did not answer within {timeout:g} s ({exc}). Check that "
            f"it runs and is reachable from this machine, or change [compute] scheduler in {where}."
        ) from None


def _quiet(client: Any) -> Any:
    """Drop the AllExit noise an interrupted gather leaves on the client's event loop.

    Each future of an interrupted ``gather`` leaves an asyncio task that ends in ``AllExit``
    and is never awaited; asyncio would print one traceback per future into the cell's output.
    """
    loop = client.loop.asyncio_loop

    def handler(event_loop: Any, context: dict[str, Any]) -> None:
        if type(context.get("exception")).__name__ == "AllExit":
            return
        event_loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    return client


def cancel_pending() -> int:
    """Cancel the client's unfinished futures (after an interrupt); returns how many."""
    client = _state["client"]
    if client is None:
        return 0
    from distributed import Future

    keys = [k for k, st in list(client.futures.items()) if st.status == "pending"]
    if keys:
        client.cancel([Future(k, client) for k in keys], reason="interrupted in the kernel")
    return len(keys)


def _after_cell(result: Any) -> None:
    """IPython post_run_cell hook: an interrupted cell leaves nothing running on the cluster."""
    if isinstance(getattr(result, "error_in_exec", None), KeyboardInterrupt):
        try:
            cancel_pending()
        except Exception as exc:
            _state["error"] = f"cancel after interrupt failed: {type(exc).__name__}: {exc}"


def status() -> dict[str, Any]:
    """Mode, address, workers, threads, memory, dashboard and tasks in flight, as JSON-able data.

    ``dashboard`` is the client's link whenever the scheduler serves one. ``dashboard_pages``
    says whether it shows the dashboard: a scheduler in this process without bokeh serves only
    a page saying bokeh is needed (False); a scheduler elsewhere decides for itself (None).
    """
    client = _state["client"]
    out: dict[str, Any] = {
        "mode": _mode(),
        "scheduler": _config["scheduler"],
        "started": False,
        "error": _state["error"],
    }
    if client is None:
        return out
    info = client.scheduler_info() if client.status == "running" else {}
    workers = info.get("workers", {})
    dashboard = None
    if "dashboard" in info.get("services", {}):
        try:
            dashboard = client.dashboard_link
        except Exception:
            dashboard = None
    pages = importlib.util.find_spec("bokeh") is not None if _mode() == "local" else None
    out.update(
        started=True,
        status=client.status,
        address=info.get("address") or getattr(client.scheduler, "address", None),
        workers=len(workers),
        threads=sum(w.get("nthreads", 0) for w in workers.values()),
        memory_limit_bytes=sum(w.get("memory_limit", 0) or 0 for w in workers.values()),
        dashboard=dashboard,
        dashboard_pages=pages if dashboard else None,
        tasks_in_flight=sum(1 for st in list(client.futures.values()) if st.status == "pending"),
    )
    return out


def status_json() -> str:
    return json.dumps(status(), default=str)


def _mode() -> str:
    scheduler = _config["scheduler"]
    return scheduler if scheduler in ("none", "local") else "attached"


def install(ns: dict[str, Any]) -> None:
    """Bootstrap entry: read the config, put ``dask_client`` in the namespace, hook interrupts."""
    raw = os.environ.pop(CONFIG_ENV, "")
    if raw:
        _config.update(json.loads(raw))
    ns["dask_client"] = dask_client
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return

    def restore_name(_info: Any) -> None:
        # %reset empties the namespace; the helper must outlive it like the kernel's own names
        shell.user_ns.setdefault("dask_client", dask_client)

    shell.events.register("pre_run_cell", restore_name)
    if _config["scheduler"] != "none":
        shell.events.register("post_run_cell", _after_cell)
