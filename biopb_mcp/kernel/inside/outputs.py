"""In the kernel: the save helpers every procedure calls, and the lab's conventions they follow.

Loaded by the kernel bootstrap from this file's path (the kernel may be another Python without
biopb_mcp), so it imports only the standard library until a helper is called. The host passes
the ``[outputs]`` settings as JSON in ``BIOPB_MCP_OUTPUTS``: the results path pattern, fixed
file names per step, the table delimiter and decimal mark. Without them (a kernel the server
only joined without its config, a notebook re-run) the defaults apply: ``results/`` beside the
raw file, ``<stem>_<step>.<ext>``, comma-separated tables with a decimal point.

Every save helper looks ``out_path`` up in the namespace when it is called, so a lab that
redefines ``out_path`` (in a cell or a plugin of its own) moves every save at once.
"""

from __future__ import annotations

import csv
import json
import math
import os
import string
from pathlib import Path
from typing import Any

CONFIG_ENV = "BIOPB_MCP_OUTPUTS"
"""Named in the server's ``biopb_mcp.kernel.env`` (the kernel's environment contract), which sets it."""

DEFAULT_PATTERN = "{source_dir}/results/{stem}_{step}.{ext}"
FIELDS = ("stem", "step", "ext", "source_dir")
"""The placeholders a results path pattern may use."""

ZARR_ABOVE_BYTES = 2 * 1024**3
"""An image bigger than this (2 GiB) is written as OME-Zarr unless its user-given name says TIFF:
a TIFF that size is slow to open and most viewers read it whole."""

_config: dict[str, Any] = {"path": DEFAULT_PATTERN, "names": {}, "delimiter": ",", "decimal": "."}
_ns: dict[str, Any] = {}

NAMES = ("out_path", "save_labels", "save_image", "save_table", "read_table")
"""What this plugin puts in the namespace."""


class OutputsError(ValueError):
    """A save helper was given something it cannot write; nothing was written."""


def out_path(
    step: str, ext: str, user_name: str | None = None, *, source: str | os.PathLike[str] | None = None
) -> Path:
    """Where the output of one step goes; its folder is created, the raw file is never returned.

    A name the user gave wins: ``user_name``, else ``user_names[step]`` from the namespace (a
    dict the agent sets, step -> file name). A bare name goes into the folder the rule would
    use; a name with a folder (or an absolute one) is taken as given. Otherwise the lab's
    ``[outputs]`` config decides: a fixed name for this step (``names``), else the path
    pattern (default ``{source_dir}/results/{stem}_{step}.{ext}``: ``results/`` beside the raw
    file, ``plate1_A01_nuclei-labels.tif``). ``{stem}`` is the raw file's name up to its first
    dot (``a.ome.tif`` -> ``a``). One step, one name: a re-run replaces its own output only.

    Args:
        step: the procedure's step name (``"nuclei-labels"``, ``"measure"``): one file-name part.
        ext: the extension without the dot (``"tif"``, ``"csv"``).
        user_name: the user's own file name for this output, if they gave one.
        source: the raw file the results come from; default ``source_path`` from the namespace.

    Raises:
        OutputsError: no source file is known, the step is not a plain name, or the path would
            be the raw file itself.
    """
    if not isinstance(step, str) or not step or step in (".", "..") or any(c in step for c in "/\\"):
        raise OutputsError(f"step must be a plain name such as 'nuclei-labels', got {step!r}")
    ext = str(ext).lstrip(".")
    src_value = source if source is not None else _ns.get("source_path")
    if src_value is None or str(src_value) == "":
        raise OutputsError(
            "out_path needs the raw file the results come from: set source_path = '<path of the raw "
            "file>' in the namespace first (or pass source=...); results go beside it"
        )
    src = Path(str(src_value)).expanduser().absolute()
    stem = src.name.split(".")[0] or src.name
    user_names = _ns.get("user_names") or {}
    user_name = user_name or (user_names.get(step) if isinstance(user_names, dict) else None)
    values = {"stem": stem, "step": step, "ext": ext, "source_dir": str(src.parent)}
    rule = _place(_config["path"], values, src.parent)
    if user_name:
        given = Path(str(user_name)).expanduser()
        path = given if given.is_absolute() or given.parent != Path(".") else rule.parent / given
    elif step in _config["names"]:
        path = rule.parent / _config["names"][step].format(**values)
    else:
        path = rule
    path = path.absolute()
    if path.resolve() == src.resolve():
        raise OutputsError(f"refusing to overwrite the raw data: {path} is source_path itself; give another name")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def save_labels(
    labels: Any, step: str, pixel_size_um: Any = None, user_name: str | None = None, *, axes: str | None = None
) -> Path:
    """Save a label image (0 = background) as an integer OME-TIFF with its pixel size; returns the path.

    ``uint16`` up to 65535 objects, else ``uint32``: never float or 8-bit (objects past 255
    would wrap around). Axes default to ``YX``, ``ZYX``, ``TZYX`` by dimension.

    Args:
        labels: an integer (or boolean) array, numpy or dask.
        step: the step name, for ``out_path``.
        pixel_size_um: the XY pixel size in µm, or ``(z, y, x)`` with ``None`` where unknown
            (``open_image(...).pixel_size_um``); written into the file so other tools read it.
            Default: ``pixel_size_um`` from the namespace, when set.
        user_name: the user's own file name for it.
        axes: the axes as letters (``"ZYX"``) when the default is wrong.

    Raises:
        OutputsError: not an integer array, negative values, or a bad pixel size.
    """
    import numpy as np

    data = _as_array(labels)
    if data.dtype.kind not in "biu":
        raise OutputsError(
            f"labels must be an integer array (got {data.dtype}): round and cast a float result "
            "with .astype(np.int32) only if its values are whole object numbers"
        )
    if data.size and data.min() < 0:
        raise OutputsError("labels must not be negative (0 is background, objects are 1, 2, ...)")
    top = int(data.max()) if data.size else 0
    dtype = np.uint16 if top < 2**16 else np.uint32 if top < 2**32 else np.uint64
    axes = axes or ("YX", "ZYX", "TZYX", "TCZYX")[max(0, min(data.ndim, 5) - 2)]
    return _write(data.astype(dtype, copy=False), step, pixel_size_um, user_name, axes)


def save_image(
    image: Any,
    step: str,
    pixel_size_um: Any = None,
    user_name: str | None = None,
    *,
    axes: str | None = None,
    dtype: Any = "float32",
) -> Path:
    """Save a processed image as OME-TIFF with its pixel size (OME-Zarr above 2 GiB); returns the path.

    Values are kept as ``float32`` by default (a correction or filter result is not an integer
    image). Axes default to ``YX``, ``CYX``, ``TCYX`` by dimension, and to ``ZYX`` for a 3-D
    image whose pixel size has a z step; say ``axes=`` when that guess is wrong. An image above 2 GiB goes to ``<name>.ome.zarr`` instead (unless the user named a
    ``.tif`` file, or ome-zarr is not installed: then a BigTIFF), written chunk by chunk when it
    is a dask array.

    Args:
        image: numpy or dask array.
        step: the step name, for ``out_path``.
        pixel_size_um: the XY pixel size in µm, or ``(z, y, x)`` with ``None`` where unknown;
            default ``pixel_size_um`` from the namespace, when set.
        user_name: the user's own file name for it.
        axes: the axes as letters, ending in ``YX``.
        dtype: the stored type; ``None`` keeps the image's own.

    Raises:
        OutputsError: axes that do not fit the image, or a bad pixel size.
    """
    data = image if dtype is None else _astype(image, dtype)
    ndim = len(data.shape)
    if axes is None and ndim == 3 and _z_step_known(pixel_size_um):
        axes = "ZYX"  # a (z, y, x) size with a z step says the first axis is Z: keep that step
    axes = axes or ("YX", "CYX", "TCYX", "TCZYX")[max(0, min(ndim, 5) - 2)]
    return _write(data, step, pixel_size_um, user_name, axes)


def _z_step_known(pixel_size_um: Any) -> bool:
    """Whether the size a save would write (given, else the namespace's) records a z step."""
    given = pixel_size_um if pixel_size_um is not None else _ns.get("pixel_size_um")
    try:
        return given is not None and _sizes(given)[0] is not None
    except OutputsError:
        return False


def save_table(columns: Any, step: str, user_name: str | None = None) -> Path:
    """Save a table (one row per object) as CSV in the lab's format; returns the path.

    A header row, then one row per entry. The delimiter and decimal mark come from the lab's
    ``[outputs]`` config (default ``,`` and ``.``; a decimal comma with ``;``). Put units in
    the column names (``area_um2``). Read it back with ``read_table(path)``.

    Args:
        columns: a dict of column name -> 1-D sequence (all the same length), or a pandas
            DataFrame (its index is not written; reset_index() first to keep it).
        step: the step name, for ``out_path``.
        user_name: the user's own file name for it.

    Raises:
        OutputsError: columns of different lengths or not 1-D; nothing is written.
    """
    import numpy as np

    if hasattr(columns, "to_dict") and hasattr(columns, "columns"):  # a pandas DataFrame
        columns = {str(name): columns[name].to_numpy() for name in columns.columns}
    if not isinstance(columns, dict) or not columns:
        raise OutputsError(
            f"save_table takes a dict of column name -> values or a DataFrame, got {type(columns).__name__}"
        )
    values = {str(name): np.asarray(col) for name, col in columns.items()}
    lengths = {name: col.shape for name, col in values.items()}
    if any(len(shape) != 1 for shape in lengths.values()) or len({s[0] for s in lengths.values()}) != 1:
        shown = ", ".join(f"{n}: {s}" for n, s in lengths.items())
        raise OutputsError(f"every column must be 1-D and the same length; got {shown}")
    delimiter, decimal = _config["delimiter"], _config["decimal"]
    path = Path(_out_path()(step, "csv", user_name))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter=delimiter)
        writer.writerow(list(values))
        for row in zip(*(col.tolist() for col in values.values()), strict=True):
            writer.writerow([_cell(v, decimal) for v in row])
    return path


def read_table(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a CSV table (as ``save_table`` writes it, or another tool's) into numpy columns.

    The delimiter is found from the header (``,``, ``;`` or tab); with ``;`` or tab a decimal
    comma is read as a point. Numeric columns come back as float (or int when every value is
    whole); others as strings.

    Returns:
        dict of column name -> 1-D numpy array, in file order.
    """
    import numpy as np

    with open(path, newline="", encoding="utf-8-sig") as fh:
        text = fh.read()
    first = text.split("\n", 1)[0]
    delimiter = max((";", "\t", ","), key=first.count) if first else _config["delimiter"]
    rows = [r for r in csv.reader(text.splitlines(), delimiter=delimiter) if r]
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    out: dict[str, Any] = {}
    for i, name in enumerate(header):
        raw = [r[i] if i < len(r) else "" for r in body]
        out[name] = _column(raw, delimiter, np)
    return out


# --- internals --------------------------------------------------------------------------------


def _out_path() -> Any:
    """The ``out_path`` in the namespace at call time (a lab may have redefined it), else ours.

    A non-callable value under that name (a procedure's own ``out_path = "labels.zarr"``) is a
    variable, not a replacement: the built-in rule applies then.
    """
    current = _ns.get("out_path")
    return current if callable(current) else out_path


def _have(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in modules)


def _place(pattern: str, values: dict[str, str], source_dir: Path) -> Path:
    path = Path(os.path.expanduser(pattern.format(**values)))
    return path if path.is_absolute() else source_dir / path


def _as_array(data: Any) -> Any:
    import numpy as np

    if hasattr(data, "compute") and not isinstance(data, np.ndarray):
        data = data.compute()
    return np.asarray(data)


def _astype(data: Any, dtype: Any) -> Any:
    import numpy as np

    if hasattr(data, "astype") and hasattr(data, "compute"):  # dask: stays lazy
        return data.astype(dtype)
    return np.asarray(data).astype(dtype, copy=False)


def _sizes(pixel_size_um: Any) -> tuple[float | None, float | None, float | None]:
    """(z, y, x) in µm from a float (XY) or a (z, y, x) / (y, x) tuple with None where unknown."""
    if pixel_size_um is None:
        return None, None, None
    if isinstance(pixel_size_um, (int, float)) and not isinstance(pixel_size_um, bool):
        z, y, x = None, pixel_size_um, pixel_size_um
    else:
        try:
            parts = list(pixel_size_um)
        except TypeError:
            raise OutputsError(f"pixel_size_um must be a number or (z, y, x), got {pixel_size_um!r}") from None
        if len(parts) == 2:
            parts = [None, *parts]
        if len(parts) != 3:
            raise OutputsError(f"pixel_size_um must be a number, (y, x) or (z, y, x), got {pixel_size_um!r}")
        z, y, x = parts
    out: list[float | None] = []
    for v in (z, y, x):
        if v is None:
            out.append(None)
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise OutputsError(f"pixel_size_um must hold numbers or None, got {v!r}") from None
        if not (math.isfinite(f) and f > 0):
            raise OutputsError(f"a pixel size must be a positive number of µm, got {v!r}")
        out.append(f)
    return out[0], out[1], out[2]


def _write(data: Any, step: str, pixel_size_um: Any, user_name: str | None, axes: str) -> Path:
    axes = axes.upper()
    shape = tuple(data.shape)
    if len(axes) != len(shape) or not axes.endswith("YX") or len(set(axes)) != len(axes):
        raise OutputsError(f"axes {axes!r} do not fit an image of shape {shape}: one letter per axis, ending in YX")
    if pixel_size_um is None and _ns.get("pixel_size_um") is not None:
        try:  # the procedure's own input: the scale the file should keep
            z, y, x = _sizes(_ns["pixel_size_um"])
        except OutputsError as exc:
            print(f"note: pixel_size_um in the namespace was not used ({exc}); the file has no pixel size")
            z = y = x = None
    else:
        z, y, x = _sizes(pixel_size_um)
    nbytes = math.prod(shape) * data.dtype.itemsize
    named = user_name or ((_ns.get("user_names") or {}).get(step) if isinstance(_ns.get("user_names"), dict) else None)
    as_zarr = str(named).rstrip("/").endswith(".zarr") if named else nbytes > ZARR_ABOVE_BYTES
    if as_zarr and not _have("ome_zarr", "zarr"):
        if named:
            raise OutputsError(f"writing {named} needs the ome-zarr and zarr packages; name a .tif file instead")
        as_zarr = False  # without them, a BigTIFF holds it
    path = _out_path()(step, "ome.zarr" if as_zarr else "tif", user_name)
    if as_zarr:
        _write_zarr(data, Path(path), axes, (z, y, x))
        return Path(path)
    import tifffile

    meta: dict[str, Any] = {"axes": axes}
    if x is not None:
        meta["PhysicalSizeX"], meta["PhysicalSizeXUnit"] = x, "µm"
    if y is not None:
        meta["PhysicalSizeY"], meta["PhysicalSizeYUnit"] = y, "µm"
    if z is not None and "Z" in axes:
        meta["PhysicalSizeZ"], meta["PhysicalSizeZUnit"] = z, "µm"
    tifffile.imwrite(path, _as_array(data), metadata=meta, ome=True, bigtiff=nbytes > 2**32 - 2**25)
    return Path(path)


def _write_zarr(data: Any, path: Path, axes: str, zyx: tuple[float | None, ...]) -> None:
    """OME-Zarr (NGFF) with one resolution level and the physical scale on each axis."""
    import shutil

    import zarr
    from ome_zarr.writer import write_image

    if path.exists():
        shutil.rmtree(path)
    sizes = dict(zip("ZYX", zyx, strict=True))
    kinds = {"T": "time", "C": "channel"}
    axis_meta = [
        {"name": a.lower(), "type": kinds.get(a, "space"), **({"unit": "micrometer"} if a in "ZYX" else {})}
        for a in axes
    ]
    scale = [float(sizes.get(a) or 1.0) for a in axes]
    root = zarr.open_group(str(path), mode="w")
    write_image(
        data,
        root,
        axes=axis_meta,
        scaler=None,
        coordinate_transformations=[[{"type": "scale", "scale": scale}]],
    )


def _cell(value: Any, decimal: str) -> Any:
    if isinstance(value, float):
        text = repr(value) if math.isfinite(value) else ("" if math.isnan(value) else repr(value))
        return text.replace(".", decimal) if decimal != "." else text
    return value


def _column(raw: list[str], delimiter: str, np: Any) -> Any:
    comma_decimal = delimiter != ","
    numbers: list[float] = []
    for text in raw:
        t = text.strip()
        if comma_decimal:
            t = t.replace(",", ".")
        if t == "":
            numbers.append(math.nan)
            continue
        try:
            numbers.append(float(t))
        except ValueError:
            return np.asarray(raw)
    arr = np.asarray(numbers, dtype=float)
    finite = arr[np.isfinite(arr)]
    if (
        arr.size
        and finite.size == arr.size
        and np.all(finite == np.round(finite))
        and not any("." in t or "e" in t.lower() for t in raw)
    ):
        return arr.astype(np.int64)
    return arr


def _configure(raw: str) -> None:
    if not raw:
        return
    data = json.loads(raw)
    for key in ("path", "delimiter", "decimal"):
        if isinstance(data.get(key), str) and data[key]:
            _config[key] = data[key]
    if isinstance(data.get("names"), dict):
        _config["names"] = {str(k): str(v) for k, v in data["names"].items()}
    # a pattern with an unknown placeholder would fail at the first save, far from the config
    for field in (f for _, f, _, _ in string.Formatter().parse(_config["path"]) if f):
        if field not in FIELDS:
            _config["path"] = DEFAULT_PATTERN


def install(ns: dict[str, Any]) -> None:
    """Bootstrap entry: read the lab's ``[outputs]``, put the helpers in the namespace."""
    global _ns
    _configure(os.environ.pop(CONFIG_ENV, ""))
    _ns = ns
    helpers = {name: globals()[name] for name in NAMES}
    ns.update(helpers)
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def restore_names(_info: Any) -> None:
        # %reset empties the namespace; the helpers must outlive it like the kernel's own names,
        # but a name the agent or a lab plugin redefined stays theirs
        for name, helper in helpers.items():
            shell.user_ns.setdefault(name, helper)

    shell.events.register("pre_run_cell", restore_names)
