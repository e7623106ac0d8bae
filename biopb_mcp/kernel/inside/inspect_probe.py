"""Runs inside the kernel for inspect_object: the facts about one object, as JSON.

Sent to the kernel as source (the kernel may be another Python without biopb_mcp), so it uses
the standard library only, and looks at numpy, dask, pandas, xarray, PIL or zarr only when the
kernel has already imported them: an inspection never imports a library, never computes a dask
array and never reads a chunked array's data. The host formats the answer (``inspection.py``).

For a data object the agent needs its shape, type and values, not the docstring of its class
(numpy's alone is 3,000 characters); functions, classes and modules keep their docstrings.
"""

from __future__ import annotations

import builtins
import inspect
import json
import sys
from typing import Any

RANGE_MAX_ELEMENTS = 20_000_000
"""Largest in-memory array whose min/max is computed (about 0.1 s): past it the range is skipped."""

SHORT_REPR = 600
"""Characters of repr kept for a data object (its shape and range say the rest)."""

CONTAINER_REPR = 200
"""Characters of repr kept for a list, tuple, set or dict whose elements are described one by one."""

ITEMS_SHOWN = 5
"""Elements of a list, tuple, set or dict described one line each."""

CLASS_DOC_CHARS = 300
"""Of an instance's inherited class docstring, the first paragraph up to this many characters."""


def _class(module: str, name: str) -> type | None:
    """``module.name`` when the kernel has imported that module and it is a class, else None."""
    cls = getattr(sys.modules.get(module), name, None)
    return cls if isinstance(cls, type) else None


def _is(obj: Any, module: str, name: str) -> bool:
    cls = _class(module, name)
    return cls is not None and isinstance(obj, cls)


def _type_name(obj: Any) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # not reached


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def _numpy_range(arr: Any) -> str:
    """min .. max of an in-memory numpy array, NaNs skipped; why not, when it is not cheap."""
    np = sys.modules["numpy"]
    if arr.size == 0:
        return "empty"
    if arr.dtype.kind not in "biuf":
        return f"not computed ({arr.dtype} values)"
    if arr.size > RANGE_MAX_ELEMENTS:
        return f"not computed ({arr.size:,} elements; computed up to {RANGE_MAX_ELEMENTS:,})"
    if arr.dtype.kind == "f":
        nans = int(np.count_nonzero(np.isnan(arr)))
        if nans == arr.size:
            return "all NaN"
        note = f" ({nans:,} NaN)" if nans else ""
        return f"{np.nanmin(arr)} .. {np.nanmax(arr)}{note}"
    return f"{arr.min()} .. {arr.max()}"


def _short_numpy_repr(arr: Any) -> str:
    np = sys.modules["numpy"]
    with np.printoptions(threshold=20, edgeitems=2, linewidth=100):
        return repr(arr)


def _data_facts(obj: Any) -> tuple[list[list[str]], str | None] | None:
    """(label, value) facts and a short repr for a well-known data object, or None for others."""
    if _is(obj, "numpy", "ndarray"):
        facts = [
            ["shape", str(obj.shape)],
            ["dtype", str(obj.dtype)],
            ["range", _numpy_range(obj)],
            ["size", f"{obj.size:,} elements, {_bytes(obj.nbytes)}"],
        ]
        if _is(obj, "numpy", "memmap") and getattr(obj, "filename", None):
            facts.append(["file", str(obj.filename)])
        return facts, _short_numpy_repr(obj)
    if _is(obj, "numpy", "generic"):
        return [["dtype", str(obj.dtype)]], repr(obj)
    if _is(obj, "dask.array", "Array"):
        return [
            ["shape", str(obj.shape)],
            ["dtype", str(obj.dtype)],
            ["chunks", f"{obj.chunksize} each, {obj.npartitions:,} in all"],
            ["size", f"{obj.size:,} elements, {_bytes(obj.nbytes)} when computed"],
            ["range", "not computed (a dask array: computing it would run its whole graph)"],
        ], None
    if _is(obj, "pandas", "DataFrame"):
        cols = [f"{c} ({t})" for c, t in list(obj.dtypes.items())[:20]]
        more = f", ... ({obj.shape[1]} columns)" if obj.shape[1] > 20 else ""
        facts = [
            ["shape", f"{obj.shape} (rows, columns)"],
            ["columns", ", ".join(cols) + more],
            ["index", f"{type(obj.index).__name__}, {len(obj.index):,} entries"],
            ["memory", _bytes(int(obj.memory_usage(deep=False).sum()))],
        ]
        return facts, obj.to_string(max_rows=6, max_cols=8, max_colwidth=30)
    if _is(obj, "pandas", "Series"):
        facts = [["len", f"{len(obj):,}"], ["dtype", str(obj.dtype)], ["name", repr(obj.name)]]
        if obj.dtype.kind in "biuf" and 0 < len(obj) <= RANGE_MAX_ELEMENTS:
            facts.append(["range", f"{obj.min()} .. {obj.max()}"])
        return facts, obj.to_string(max_rows=6)
    if _is(obj, "xarray", "DataArray"):
        np_array = _class("numpy", "ndarray")
        in_memory = np_array is not None and isinstance(obj.variable._data, np_array)
        facts = [
            ["dims", ", ".join(f"{d}: {n}" for d, n in obj.sizes.items())],
            ["dtype", str(obj.dtype)],
            ["coords", ", ".join(map(str, obj.coords)) or "none"],
            ["name", repr(obj.name)],
            ["range", _numpy_range(obj.values) if in_memory else "not computed (lazy or chunked data)"],
        ]
        if obj.attrs:
            facts.append(["attrs", ", ".join(map(str, list(obj.attrs)[:20]))])
        return facts, None
    if _is(obj, "xarray", "Dataset"):
        variables = [f"{n} ({', '.join(map(str, v.dims))}; {v.dtype})" for n, v in list(obj.data_vars.items())[:20]]
        return [
            ["dims", ", ".join(f"{d}: {n}" for d, n in obj.sizes.items())],
            ["data variables", ", ".join(variables) or "none"],
            ["coords", ", ".join(map(str, obj.coords)) or "none"],
        ], None
    if _is(obj, "PIL.Image", "Image"):
        facts = [
            ["size", f"{obj.size[0]} x {obj.size[1]} px (width x height)"],
            ["mode", str(obj.mode)],
            ["format", str(obj.format)],
        ]
        if obj.size[0] * obj.size[1] <= RANGE_MAX_ELEMENTS:
            facts.append(["range", str(obj.getextrema())])
        return facts, None
    if _is(obj, "zarr", "Array"):
        return [
            ["shape", str(obj.shape)],
            ["dtype", str(obj.dtype)],
            ["chunks", str(obj.chunks)],
            ["store", str(getattr(obj, "store_path", None) or getattr(obj, "store", ""))],
            ["range", "not computed (reading it would load the whole array)"],
        ], None
    if _is(obj, "zarr", "Group"):
        names = [str(k) for k in list(obj.keys())[:20]]
        return [["members", ", ".join(names) or "none"]], None
    return None


def _brief(obj: Any) -> str:
    """One line about an element of a container."""
    facts = None
    try:
        facts = _data_facts(obj)
    except Exception:  # a broken element must not break the container's answer
        facts = None
    if facts is not None:
        shown = [v for k, v in facts[0] if k in ("shape", "dtype", "dims", "mode", "len")] or [facts[0][0][1]]
        return f"{_type_name(obj)} {' '.join(shown)}"
    try:
        text = repr(obj)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    return f"{_type_name(obj)} {_cut(text, 80)}"


def _items(obj: Any) -> list[str] | None:
    """One line per shown element of a list, tuple, set or dict (keys with their values)."""
    if isinstance(obj, dict):
        pairs = [(repr(k), v) for k, v in list(obj.items())[:ITEMS_SHOWN]]
    elif isinstance(obj, (list, tuple)):
        pairs = [(f"[{i}]", v) for i, v in enumerate(obj[:ITEMS_SHOWN])]
    elif isinstance(obj, (set, frozenset)):
        pairs = [("-", v) for v in list(obj)[:ITEMS_SHOWN]]
    else:
        return None
    lines = [f"{_cut(key, 40)}: {_brief(value)}" for key, value in pairs]
    if len(obj) > ITEMS_SHOWN:
        lines.append(f"... {len(obj) - ITEMS_SHOWN} more")
    return lines


def _lookup(path: str, ns: dict[str, Any]) -> tuple[Any, str | None]:
    parts = path.split(".")
    if parts[0] in ns:
        obj = ns[parts[0]]
    elif hasattr(builtins, parts[0]):
        obj = getattr(builtins, parts[0])
    else:
        return None, f"name {parts[0]!r} is not defined in the kernel namespace"
    for i, attr in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, attr)
        except Exception as exc:
            return None, f"{'.'.join(parts[:i])} has no attribute {attr!r} ({type(exc).__name__}: {exc})"
    return obj, None


def _doc(obj: Any, out: dict[str, Any], limit_doc: int) -> None:
    """The docstring of a function, class or module; of an instance, at most its class's first
    paragraph (the agent asked about its data, not about its type)."""
    if isinstance(obj, (str, bytes, int, float, complex, bool, list, dict, tuple, set, frozenset)):
        return
    doc = inspect.getdoc(obj)
    if not doc:
        return
    is_instance = not (inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj))
    if is_instance and doc == inspect.getdoc(type(obj)):
        first = doc.split("\n\n")[0]
        out["class_doc"] = _cut(first, CLASS_DOC_CHARS)
        out["class_doc_cut"] = first != doc or len(first) > CLASS_DOC_CHARS
        return
    out["doc"] = _cut(doc, limit_doc)


def describe(path: str, ns: dict[str, Any], limit_repr: int, limit_doc: int) -> str:
    """The facts about ``path`` in namespace ``ns`` as a JSON object (``error`` when not found)."""
    out: dict[str, Any] = {"path": path}
    obj, error = _lookup(path, ns)
    if error is not None:
        out["error"] = error
        return json.dumps(out)
    out["type"] = _type_name(obj)
    try:
        data = _data_facts(obj)
    except Exception as exc:  # a library's odd object: fall back to the general description
        data = None
        out["facts_error"] = f"{type(exc).__name__}: {exc}"
    if data is not None:
        out["facts"], short = data
        try:
            text = short if short is not None else repr(obj)
        except Exception as exc:
            text = f"<repr failed: {type(exc).__name__}: {exc}>"
        out["repr"] = _cut(text, SHORT_REPR)
        return json.dumps(out, default=str)
    try:
        items = _items(obj)
    except Exception:
        items = None
    try:
        text = repr(obj)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    # a container's elements are described one by one below: its own repr need only open it
    out["repr"] = _cut(text, CONTAINER_REPR if items else limit_repr)
    if callable(obj):
        try:
            out["signature"] = f"{getattr(obj, '__name__', path.split('.')[-1])}{inspect.signature(obj)}"
        except (TypeError, ValueError):
            pass
    _doc(obj, out, limit_doc)
    # array-likes only: a module or a class also carries shape/dtype attributes
    if not (inspect.ismodule(obj) or inspect.isclass(obj) or callable(obj)):
        try:
            if hasattr(obj, "shape") and hasattr(obj, "dtype"):
                out["facts"] = [["shape", str(obj.shape)], ["dtype", str(obj.dtype)]]
        except Exception:
            pass
    try:
        if not isinstance(obj, (str, bytes)) and hasattr(obj, "__len__"):
            out["len"] = len(obj)
    except Exception:
        pass
    if items:
        out["items"] = items
    f = getattr(obj, "__file__", None) if inspect.ismodule(obj) else None
    if f:
        out["file"] = str(f)
    if inspect.ismodule(obj) or inspect.isclass(obj):
        names = [n for n in dir(obj) if not n.startswith("_")]
        out["attributes"] = ", ".join(names[:60]) + (f", ... ({len(names)} in all)" if len(names) > 60 else "")
    return json.dumps(out, default=str)
