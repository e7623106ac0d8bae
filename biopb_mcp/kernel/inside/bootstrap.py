"""Code run INSIDE the kernel at start: parent-death watcher, umask restore, plugin loading.

The host passes this file to the kernel as ``--IPKernelApp.exec_files=<this file>`` and, should
that not run (IPython swallows exec_files errors), executes its source once more after the kernel
answers. It must therefore be standard-library only (the kernel may be another Python
environment without biopb_mcp) and must not leave helper names in the user namespace.

Inputs come from environment variables set by the host:
``BIOPB_MCP_LIFELINE_FD`` (read end of the parent-death pipe), ``BIOPB_MCP_UMASK`` (the umask
to restore after the kernel bound its sockets under 0o077), ``BIOPB_MCP_PLUGINS_DIR`` and
``BIOPB_MCP_KERNEL_LOG``; ``BIOPB_MCP_BUILTIN_PLUGINS`` (built-in plugin files, such as
``inside/compute.py``) and whatever those read; ``BIOPB_MCP_ATTACHED`` in a kernel the server
only joined. The names, and who sets each, are declared in the server's ``biopb_mcp.kernel.env``
(this file reads them by their literal names: it imports nothing of biopb_mcp). The outcome is stored as a JSON-able dict in the namespace under
``__biopb_bootstrap__``, which the host fetches during its readiness check.

The kernel is shared: a scientist may attach a console to it. Only the server ends it (by killing
its process group), so the bootstrap refuses every ``shutdown_request`` and makes ``exit``/``quit``
typed in a console keep the kernel: leaving a console never costs the agent its namespace.
"""


def _biopb_bootstrap(ns):  # type: ignore[no-untyped-def]  # runs in the kernel's Python
    import contextlib
    import os
    import signal
    import sys
    import threading
    import time
    import traceback

    record = {"pid": os.getpid(), "lifeline": False, "loaded": [], "failed": [], "errors": []}
    ns["__biopb_bootstrap__"] = record
    try:
        hidden = get_ipython().user_ns_hidden  # type: ignore[name-defined]  # noqa: F821
        hidden["__biopb_bootstrap__"] = record
    except Exception:
        pass

    log_path = os.environ.get("BIOPB_MCP_KERNEL_LOG", "")

    def log(line):
        """Append one line to the kernel log (never to the agent's output)."""
        if not log_path:
            return
        try:
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(f"[biopb bootstrap {time.strftime('%H:%M:%S')}] {line}\n")
        except OSError:
            pass

    # 1. Parent death: the server holds the only write end of this pipe, so EOF means it is
    #    gone (even after SIGKILL). Kill our own process group (children too) and leave.
    def watch(fd):
        while True:
            try:
                data = os.read(fd, 64)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                break
        log("server gone (lifeline closed); kernel exiting")
        try:
            if os.getpgrp() == os.getpid():
                os.killpg(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(0)

    try:
        fd_text = os.environ.pop("BIOPB_MCP_LIFELINE_FD", "")
        if fd_text:
            fd = int(fd_text)
            os.set_inheritable(fd, False)
            threading.Thread(target=watch, args=(fd,), name="biopb-lifeline", daemon=True).start()
            record["lifeline"] = True
    except Exception:
        record["errors"].append("lifeline: " + traceback.format_exc())

    # 2. The host launched us with umask 0o077 so the IPC sockets are 0600; give user code the
    #    umask the server had, so files the scientist saves get normal permissions.
    try:
        umask_text = os.environ.pop("BIOPB_MCP_UMASK", "")
        if umask_text:
            os.umask(int(umask_text, 8))
    except Exception:
        record["errors"].append("umask: " + traceback.format_exc())

    # 2b. A console's quit must not end the agent's kernel. The server never asks the kernel to
    #     shut down (it kills the process group, which no message can prevent), so every
    #     shutdown_request comes from another client: refuse it, on both channels. A session
    #     id would not do as a credential: every client sees the server's on iopub.
    #     A kernel the server only joined (BIOPB_MCP_ATTACHED) belongs to its frontend: its
    #     shutdown stays the frontend's, so the guard is not installed there.
    attached = bool(os.environ.get("BIOPB_MCP_ATTACHED"))
    try:
        shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821
        kernel = shell.kernel

        async def refuse_shutdown(stream, ident, parent):
            restart = bool((parent.get("content") or {}).get("restart", False))
            content = {
                "status": "error",
                "restart": restart,
                "ename": "ShutdownRefused",
                "evalue": "this kernel belongs to a biopb-mcp server and only the server shuts it "
                "down (restart_kernel, or stopping the server); just disconnect, the "
                "kernel keeps running.",
                "traceback": [],
            }
            kernel.session.send(stream, "shutdown_reply", content, parent, ident=ident)
            log(
                f"refused a shutdown_request (restart={restart}) from session "
                f"{parent.get('header', {}).get('session', '?')}"
            )

        for handlers in () if attached else (kernel.shell_handlers, kernel.control_handlers):
            if "shutdown_request" in handlers:
                handlers["shutdown_request"] = refuse_shutdown

        # `exit`/`quit` in a console: ask the console to keep the kernel instead of shutting it down.
        ask_exit = shell.ask_exit

        def keep_kernel_on_exit():
            shell.keepkernel_on_exit = True
            ask_exit()

        if not attached:
            shell.ask_exit = keep_kernel_on_exit
        record["shutdown_guard"] = not attached
    except Exception:
        record["errors"].append("shutdown guard: " + traceback.format_exc())

    # 3. Built-in plugins (files of biopb_mcp named by the host), each imported as its own module
    #    so its helpers stay out of the namespace; its install(ns) adds what the agent uses.
    #    They load first so a user plugin may wrap or replace what they add.
    record["builtin"] = []
    for path in filter(None, os.environ.pop("BIOPB_MCP_BUILTIN_PLUGINS", "").split(os.pathsep)):
        try:
            import importlib.util

            name = "biopb_mcp_builtin_" + os.path.splitext(os.path.basename(path))[0]
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            before = dict(ns)
            module.install(ns)
            added = sorted(k for k, v in ns.items() if not k.startswith("_") and before.get(k, before) is not v)
            record["builtin"].append({"name": name, "source": path, "names": added})
        except Exception:
            record["errors"].append(f"built-in plugin {path}: " + traceback.format_exc())
            log(f"built-in plugin {path} failed:\n{traceback.format_exc()}")

    # 4. User plugins. Their prints go to the kernel log, not to the agent nor the server's stdout.
    def load_all(out):
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            plugins_dir = os.environ.get("BIOPB_MCP_PLUGINS_DIR", "")
            paths = []
            if plugins_dir and os.path.isdir(plugins_dir):
                paths = sorted(
                    os.path.join(plugins_dir, n)
                    for n in os.listdir(plugins_dir)
                    if n.endswith(".py") and not n.startswith("_")
                )
            for path in paths:
                name = os.path.basename(path)
                saved = ns.get("__file__", None)
                try:
                    with open(path, encoding="utf-8") as fh:
                        source = fh.read()
                    ns["__file__"] = path
                    exec(compile(source, path, "exec"), ns)
                    record["loaded"].append({"name": name, "source": path})
                    log(f"plugin {path} loaded")
                except BaseException as exc:  # a plugin's SystemExit must not end the kernel
                    tb = traceback.format_exc()
                    record["failed"].append({"name": name, "source": path, "error": f"{type(exc).__name__}: {exc}"})
                    log(f"plugin {path} failed and was skipped:\n{tb}")
                finally:
                    if saved is None:
                        ns.pop("__file__", None)
                    else:
                        ns["__file__"] = saved
            try:
                from importlib.metadata import entry_points

                eps = list(entry_points(group="biopb_mcp.namespace"))
            except Exception:
                eps = []
                record["errors"].append("entry points: " + traceback.format_exc())
            for ep in eps:
                label = f"{ep.name} = {ep.value}"
                try:
                    obj = ep.load()
                    if isinstance(obj, dict):
                        ns.update(obj)
                    elif callable(obj) and not isinstance(obj, type):
                        result = obj(ns)  # a function populates the namespace itself
                        if isinstance(result, dict):
                            ns.update(result)
                    else:
                        ns[ep.name] = obj
                    record["loaded"].append({"name": ep.name, "source": f"entry point {label}"})
                    log(f"entry point {label} loaded")
                except BaseException as exc:
                    record["failed"].append(
                        {
                            "name": ep.name,
                            "source": f"entry point {label}",
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                    )
                    log(f"entry point {label} failed and was skipped:\n{traceback.format_exc()}")

    try:
        if log_path:
            with open(log_path, "a", encoding="utf-8", buffering=1) as out:
                load_all(out)
        else:
            with open(os.devnull, "w", encoding="utf-8") as out:
                load_all(out)
    except BaseException:
        record["errors"].append("plugins: " + traceback.format_exc())
        log("plugin loading failed:\n" + traceback.format_exc())
    sys.stdout.flush()


if "__biopb_bootstrap__" not in globals():
    try:
        _biopb_bootstrap(globals())
    finally:
        del _biopb_bootstrap
else:  # already ran (exec_files worked); the host's fallback is a no-op
    del _biopb_bootstrap
