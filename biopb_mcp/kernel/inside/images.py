"""In the kernel: ``open_image(path)``, the scientist's file with the physical facts it records.

Loaded by the kernel bootstrap from this file's path (the kernel may be another Python without
biopb_mcp), so it imports only the standard library until first use; bioio and its format plugins
are imported by the call.

A microscope file records its pixel size, channel names and frame interval, each in its own
place and unit: OME-XML attributes with a unit attribute, an ImageJ description and a rational
resolution tag, NGFF axes with a unit and a scale per pyramid level, a vendor's own metadata.
This is the one place they are read and turned into micrometres and seconds. Readers answer with
defaults for facts a file lacks (bioio's TIFF reader says 1.0 for a TIFF with no resolution, its
channel names are ``Channel:0:0`` placeholders): those are refused here, because an area in
"µm²" computed from an invented 1.0 is a wrong number that looks right. A fact the file does not
record is ``None`` (or an empty list) and the ``repr`` says it is missing.

The host passes ``{"lazy_above_bytes": N, "install": {extra: requirement}}`` as JSON in
``BIOPB_MCP_IMAGES``: the requirement that installs each extra of this copy (the bare name on
PyPI is another project's until this one is published).

Its module state (``_config``) is the kernel's own: this file is loaded once per kernel
process, so a module global here lives and dies with that kernel.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import re
import shlex
from typing import Any

CONFIG_ENV = "BIOPB_MCP_IMAGES"
"""Named in the server's ``biopb_mcp.kernel.env`` (the kernel's environment contract), which sets it."""

_config: dict[str, Any] = {"lazy_above_bytes": 512_000_000, "install": {}}


def _install_line(extra: str) -> str:
    """The pip line that installs one extra of the biopb-mcp this kernel was started by."""
    target = _config["install"].get(extra) or f"<your biopb-mcp checkout>[{extra}]"
    return "pip install " + shlex.quote(target)


_LENGTH_UM = {
    "pm": 1e-6,
    "picometer": 1e-6,
    "å": 1e-4,
    "angstrom": 1e-4,
    "nm": 1e-3,
    "nanometer": 1e-3,
    "nanometre": 1e-3,
    "µm": 1.0,
    "μm": 1.0,
    "um": 1.0,
    "micron": 1.0,
    "microns": 1.0,
    "micrometer": 1.0,
    "micrometre": 1.0,
    "mm": 1e3,
    "millimeter": 1e3,
    "millimetre": 1e3,
    "cm": 1e4,
    "centimeter": 1e4,
    "centimetre": 1e4,
    "m": 1e6,
    "meter": 1e6,
    "metre": 1e6,
}
"""Micrometres per unit, by every spelling the formats use (OME symbols, NGFF/UDUNITS names,
ImageJ's ``micron``). Inches are left out on purpose: a TIFF's dots per inch is a print setting."""

_TIME_S = {
    "ns": 1e-9,
    "nanosecond": 1e-9,
    "µs": 1e-6,
    "μs": 1e-6,
    "us": 1e-6,
    "microsecond": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "millisecond": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
}
"""Seconds per unit."""

_PLACEHOLDER_CHANNEL = re.compile(r"^Channel:\d+(:\d+)?$")
"""The names bioio gives channels a file does not name."""

_VENDOR_EXTRA = {
    ".nd2": ("bioio-nd2", "Nikon ND2"),
    ".czi": ("bioio-czi", "Zeiss CZI"),
    ".lif": ("bioio-lif", "Leica LIF"),
}
"""Vendor formats, the bioio plugin that reads each, and the format's name for the message."""

_CORE_PLUGINS = {
    ".tif": "bioio-tifffile",
    ".tiff": "bioio-tifffile",
    ".zarr": "bioio-ome-zarr",
    ".png": "bioio-imageio",
    ".jpg": "bioio-imageio",
    ".jpeg": "bioio-imageio",
}


class ReaderMissing(ImportError):
    """The file's format needs a reader this kernel's Python does not have; the message names the
    extra (or package) to install."""


class ImageFile:
    """One scene of an image file: its facts at once, its pixels on first use of ``data``.

    Attributes:
        path: the file (or OME-Zarr folder) opened.
        format: what the file is and which reader reads it.
        dims: one letter per axis of ``data``, in the file's order (e.g. ``"TCZYX"``, ``"YX"``).
        shape: the shape of ``data``.
        dtype: the pixel type, as a string.
        pixel_size_um: ``(z, y, x)`` in micrometres; ``None`` for an axis the file does not record.
        channel_names: the file's channel names; empty when it names none.
        time_interval_s: seconds between time points; ``None`` when the file does not record it.
        scenes: the names of every scene (series, position) in the file.
        scene: the name of the scene this object holds.
        level: the pyramid level this object holds (0 = full resolution).
        level_shapes: the shape of every pyramid level, full resolution first.
        sources: where each fact was read, by fact name.
        lazy: ``data`` is a dask array (the image is bigger than the configured size).
    """

    def __init__(self, reader: Any, facts: dict[str, Any], lazy: bool) -> None:
        # a reader, or a function that makes one when the pixels are first asked for (an
        # OME-Zarr's facts come from its JSON alone, so opening one imports nothing heavy)
        self._source = reader
        self._data: Any = None
        self.path: str = facts["path"]
        self.format: str = facts["format"]
        self.dims: str = facts["dims"]
        self.shape: tuple[int, ...] = facts["shape"]
        self.dtype: str = facts["dtype"]
        self.pixel_size_um: tuple[float | None, float | None, float | None] = facts["pixel_size_um"]
        self.channel_names: list[str] = facts["channel_names"]
        self.time_interval_s: float | None = facts["time_interval_s"]
        self.scenes: list[str] = facts["scenes"]
        self.scene: str = facts["scene"]
        self.level: int = facts["level"]
        self.level_shapes: list[tuple[int, ...]] = facts["level_shapes"]
        self.sources: dict[str, str] = facts["sources"]
        self.notes: list[str] = facts["notes"]
        self.lazy = lazy

    @property
    def nbytes(self) -> int:
        """Bytes of ``data`` once read."""
        return math.prod(self.shape) * _itemsize(self.dtype)

    @property
    def data(self) -> Any:
        """The pixels in the file's axis order (``dims``): a numpy array read on first use, or a
        lazy dask array when ``lazy`` (compute only what you need: a crop, a projection)."""
        if self._data is None:
            self._data = self._reader().dask_data if self.lazy else self._reader().data
        return self._data

    def get(self, **index: int | str) -> Any:
        """The pixels with some axes fixed: ``im.get(T=0, C="DAPI", Z=3)`` is one (Y, X) plane.

        Each keyword is an axis letter and an index (for C, also a channel name). A fixed axis is
        dropped, and so is every other axis of size 1 except Y and X; the rest keep their order
        in ``dims``. Naming an axis the image lacks is fine with index 0 (so one call fits files
        with and without Z or T). Lazy stays lazy: nothing is read until you compute.

        Raises:
            ValueError: an axis the image lacks with an index other than 0, or an unknown
                channel name.
            IndexError: an index past the axis' size.
        """
        fixed: dict[str, int] = {}
        for key, value in index.items():
            axis = key.upper()
            if isinstance(value, str):
                if axis != "C" or value not in self.channel_names:
                    raise ValueError(f"{value!r} is not a channel of this image; channel_names = {self.channel_names}")
                value = self.channel_names.index(value)
            if axis not in self.dims:
                if value:
                    raise ValueError(f"this image has no {axis} axis (dims {self.dims!r}, shape {self.shape})")
                continue
            size = self.shape[self.dims.index(axis)]
            if not -size <= value < size:
                raise IndexError(f"{axis}={value} is outside this image's {size} {axis} positions")
            fixed[axis] = int(value)
        where: list[Any] = []
        for axis, size in zip(self.dims, self.shape, strict=True):
            if axis in fixed:
                where.append(fixed[axis])
            elif size == 1 and axis not in "YX":
                where.append(0)
            else:
                where.append(slice(None))
        return self.data[tuple(where)]

    def to_dask(self) -> Any:
        """The pixels as a lazy dask array, whatever their size (nothing is read)."""
        return self._reader().dask_data

    def _reader(self) -> Any:
        if callable(self._source):
            self._source = self._source()
        return self._source

    def axis(self, letter: str) -> int:
        """The index of axis ``letter`` (``"Z"``, ``"C"``…) in ``data``.

        Raises:
            ValueError: the image has no such axis (its ``dims`` are named in the message).
        """
        i = self.dims.find(letter.upper())
        if i < 0:
            raise ValueError(f"{os.path.basename(self.path)} has no {letter.upper()} axis (dims {self.dims}).")
        return i

    def __repr__(self) -> str:
        return _describe(self)


def open_image(
    path: str | os.PathLike[str], scene: int | str | None = None, *, level: int = 0, lazy: bool | None = None
) -> ImageFile:
    """Open a microscope image and read what it records, without reading its pixels.

    Reads TIFF, OME-TIFF, ImageJ TIFF, OME-Zarr (NGFF 0.4 and 0.5), PNG and JPEG, and with the
    ``formats`` extra Nikon ND2, Zeiss CZI and Leica LIF. Print the result to see shape, axes,
    pixel size, channels, frame interval and what the file does not record; use ``.data`` for
    the pixels. A fact the file lacks is ``None``: ask the user for it, never assume 1 µm.

    Args:
        path: the file, or an OME-Zarr folder.
        scene: which scene (series, position) by index or name; default the first. ``.scenes``
            lists them.
        level: pyramid level, 0 = full resolution (OME-Zarr and pyramidal TIFF); the pixel size
            is that level's.
        lazy: ``True`` for a dask array whatever the size, ``False`` for numpy; default: dask
            when the image is bigger than the configured size.

    Raises:
        FileNotFoundError: no such file.
        ReaderMissing: the format's reader is not installed (the message names what to install).
        ValueError: an unknown scene or level (the message lists the valid ones), or a file no
            installed reader can read.
    """
    p = os.path.expanduser(os.fspath(path))
    if not os.path.exists(p):
        raise FileNotFoundError(f"No such file: {p}")
    suffix = _suffix(p)
    if _zarr_root(p):
        opened = _open_zarr(p, scene, level, lazy)
        if opened is not None:
            return opened
    image = _bioimage(p, suffix)
    scenes = [str(s) for s in image.scenes]
    index = _scene_index(scene, scenes, p)
    if index:
        image.set_scene(index)
    levels = list(getattr(image, "resolution_levels", (0,)) or (0,))
    module = type(image.reader).__module__.split(".")[0]
    tiff_levels = _tiff_level_shapes(p, index, image.reader) if module in _TIFF_READERS and levels == [0] else []
    if len(tiff_levels) > 1:
        levels = list(range(len(tiff_levels)))
    if level not in levels:
        raise ValueError(f"{os.path.basename(p)} has pyramid levels {levels}; level {level} is not one of them.")
    level_shapes = tiff_levels if len(tiff_levels) > 1 else _level_shapes(image, levels)
    reader: Any
    if level and tiff_levels:
        reader = _TiffLevel(p, index, level, "".join(str(d) for d in image.reader.dims.order), level_shapes[level])
    else:
        if level:
            image.set_resolution_level(level)
        reader = image.reader
    dims = "".join(str(d) for d in reader.dims.order)
    shape = tuple(int(n) for n in reader.shape)
    facts: dict[str, Any] = {
        "path": p,
        "format": "",
        "dims": dims,
        "shape": shape,
        "dtype": str(reader.dtype),
        "pixel_size_um": (None, None, None),
        "channel_names": [],
        "time_interval_s": None,
        "scenes": scenes,
        "scene": scenes[index] if scenes else "",
        "level": level,
        "level_shapes": level_shapes,
        "sources": {},
        "notes": [],
    }
    plugin = module.replace("_", "-")
    if module in _TIFF_READERS:
        _tiff_facts(p, index, facts, plugin)
    elif module == "bioio_ome_zarr":
        _zarr_facts(p, index, level, facts, plugin)
    elif module == "bioio_imageio":
        facts["format"] = f"{suffix.lstrip('.').upper() or 'image'} via {plugin}"
        facts["notes"].append("this format records no pixel size, channel names or frame interval")
    else:
        _reader_facts(image, facts, plugin)
    if level and module != "bioio_ome_zarr":
        facts["pixel_size_um"] = _scaled_to_level(facts["pixel_size_um"], level_shapes[0], shape, dims)
        if any(v is not None for v in facts["pixel_size_um"]):
            facts["notes"].append(f"pixel size of level 0 scaled to level {level} by the ratio of their shapes")
    if lazy is None:
        lazy = math.prod(shape) * _itemsize(facts["dtype"]) > int(_config["lazy_above_bytes"])
    return ImageFile(reader, facts, bool(lazy))


# -- opening --------------------------------------------------------------------------------------


def _suffix(path: str) -> str:
    name = os.path.basename(os.path.normpath(path)).lower()
    for compound in (".ome.tiff", ".ome.tif", ".ome.zarr"):
        if name.endswith(compound):
            return "." + compound.rsplit(".", 1)[1]
    return os.path.splitext(name)[1]


def _missing(package: str, what: str) -> ReaderMissing:
    vendor = package in {extra for extra, _ in _VENDOR_EXTRA.values()}
    extra = "formats" if vendor else "imaging"
    return ReaderMissing(
        f"Reading {what} needs the {package} reader, which this kernel's Python does not have: "
        f"install it with {_install_line(extra)} (or pip install {package}) and restart the kernel."
    )


def _bioimage(path: str, suffix: str) -> Any:
    if importlib.util.find_spec("bioio") is None:
        raise _missing("bioio", "image files") from None
    vendor = _VENDOR_EXTRA.get(suffix)
    if vendor is not None and importlib.util.find_spec(vendor[0].replace("-", "_")) is None:
        raise _missing(vendor[0], f"{vendor[1]} files") from None
    core = _CORE_PLUGINS.get(suffix)
    if core is not None and importlib.util.find_spec(core.replace("-", "_")) is None:
        raise _missing(core, f"{suffix} files") from None
    import logging
    import warnings

    import bioio
    from bioio_base.exceptions import UnsupportedFileFormatError

    reader = _reader_for(path, suffix)
    quiet = logging.getLogger("bioio")
    level = quiet.level
    # bioio logs a warning for every plugin it tried before the one that reads the file: that
    # text would reach the agent as the call's stderr
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bioio.BioImage(path, reader=reader) if reader is not None else bioio.BioImage(path)
    except UnsupportedFileFormatError:
        pass
    finally:
        quiet.setLevel(level)
    raise ValueError(
        f"No installed reader can read {os.path.basename(path)}: it is not a TIFF, OME-TIFF, "
        "OME-Zarr, PNG or JPEG, and no vendor reader claimed it (ND2, CZI and LIF come with "
        f"{_install_line('formats')})."
    ) from None


def _reader_for(path: str, suffix: str) -> Any:
    """The bioio reader for a TIFF or an OME-Zarr, chosen from the file itself (bioio would try
    every installed plugin in turn); None to let bioio choose."""
    if os.path.isdir(path) and (
        os.path.isfile(os.path.join(path, "zarr.json")) or os.path.isfile(os.path.join(path, ".zattrs"))
    ):
        if importlib.util.find_spec("bioio_ome_zarr") is None:
            raise _missing("bioio-ome-zarr", "OME-Zarr")
        from bioio_ome_zarr import Reader as ZarrReader

        return ZarrReader
    if suffix not in (".tif", ".tiff") or importlib.util.find_spec("tifffile") is None:
        return None
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            ome = bool(tif.is_ome and tif.ome_metadata)
    except (tifffile.TiffFileError, OSError, ValueError):
        return None
    if ome and importlib.util.find_spec("bioio_ome_tiff") is not None:
        from bioio_ome_tiff import Reader as OmeTiffReader

        return OmeTiffReader
    from bioio_tifffile import Reader as TiffReader

    return TiffReader


def _scene_index(scene: int | str | None, scenes: list[str], path: str) -> int:
    if scene is None:
        return 0
    if isinstance(scene, str):
        if scene in scenes:
            return scenes.index(scene)
    elif isinstance(scene, int) and not isinstance(scene, bool) and 0 <= scene < len(scenes):
        return scene
    raise ValueError(f"{os.path.basename(path)} has no scene {scene!r}; its scenes are {scenes} (by index or name).")


def _level_shapes(image: Any, levels: list[int]) -> list[tuple[int, ...]]:
    dims = getattr(image, "resolution_level_dims", None)
    if isinstance(dims, dict) and dims:
        # bioio gives every level's shape in its standard TCZYX order; keep the native axes' sizes
        native = "".join(str(d) for d in image.reader.dims.order)
        out = []
        for lv in levels:
            full = dict(zip("TCZYX", dims[lv], strict=False))
            out.append(tuple(int(full.get(a, n)) for a, n in zip(native, image.reader.shape, strict=True)))
        return out
    return [tuple(int(n) for n in image.reader.shape)]


_TIFF_READERS = ("bioio_ome_tiff", "bioio_tifffile")


def _tiff_level_shapes(path: str, series: int, reader: Any) -> list[tuple[int, ...]]:
    """Every level of a pyramidal TIFF (SubIFDs or tifffile's series levels), in the axes bioio
    gives level 0; bioio's TIFF readers see only the full resolution."""
    import tifffile

    dims = "".join(str(d) for d in reader.dims.order)
    try:
        with tifffile.TiffFile(path) as tif:
            if series >= len(tif.series):
                return []
            found = [(lv.axes, lv.shape) for lv in tif.series[series].levels]
    except (tifffile.TiffFileError, OSError, ValueError):
        return []
    shapes = []
    for axes, shape in found:
        sizes = dict(zip(axes, shape, strict=True))
        if not set(axes) <= set(dims):
            return []
        shapes.append(tuple(int(sizes.get(a, 1)) for a in dims))
    return shapes if shapes and shapes[0] == tuple(int(n) for n in reader.shape) else []


class _TiffLevel:
    """One reduced level of a pyramidal TIFF, in level 0's axes: read by tifffile (numpy) or,
    lazily, through tifffile's zarr view (which needs zarr)."""

    def __init__(self, path: str, series: int, level: int, dims: str, shape: tuple[int, ...]) -> None:
        self.path, self.series, self.level, self.shape = path, series, level, shape
        self.dims = type("Dims", (), {"order": dims})()
        import tifffile

        with tifffile.TiffFile(path) as tif:
            self.dtype = tif.series[series].levels[level].dtype

    @property
    def data(self) -> Any:
        import tifffile

        with tifffile.TiffFile(self.path) as tif:
            return tif.series[self.series].levels[self.level].asarray().reshape(self.shape)

    @property
    def dask_data(self) -> Any:
        if importlib.util.find_spec("zarr") is None:
            raise ReaderMissing(
                "A lazy read of a pyramid level of a TIFF needs zarr: install it with "
                "pip install 'biopb-mcp[distributed]', or pass lazy=False for numpy."
            )
        import dask.array as da
        import tifffile
        import zarr

        store = tifffile.imread(self.path, aszarr=True, series=self.series, level=self.level)
        return da.from_zarr(zarr.open_array(store, mode="r")).reshape(self.shape)


def _scaled_to_level(
    size: tuple[float | None, float | None, float | None],
    full: tuple[int, ...],
    shape: tuple[int, ...],
    dims: str,
) -> tuple[float | None, float | None, float | None]:
    out: list[float | None] = []
    for value, axis in zip(size, "ZYX", strict=True):
        i = dims.find(axis)
        out.append(value * full[i] / shape[i] if value is not None and i >= 0 and shape[i] else value)
    return (out[0], out[1], out[2])


# -- units ----------------------------------------------------------------------------------------


def length_um(value: Any, unit: str | None) -> float | None:
    """``value`` in ``unit`` as micrometres; None when the unit is absent or not a length."""
    return _in_units(value, unit, _LENGTH_UM)


def time_s(value: Any, unit: str | None) -> float | None:
    """``value`` in ``unit`` as seconds; None when the unit is absent or not a time."""
    return _in_units(value, unit, _TIME_S)


def _in_units(value: Any, unit: str | None, factors: dict[str, float]) -> float | None:
    """A positive, finite ``value`` in ``unit`` scaled by ``factors`` (singular or plural unit names)."""
    if value is None or unit is None:
        return None
    key = _unit_key(unit)
    factor = factors.get(key) or factors.get(key.rstrip("s"))
    number = float(value)
    if factor is None or not math.isfinite(number) or number <= 0:
        return None
    return _tidy(number * factor)


def _unit_key(unit: str) -> str:
    text = str(getattr(unit, "value", unit)).strip().lower()
    # ImageJ writes µ as the escape \u00B5 in its description
    return text.replace("\\u00b5", "µ").replace("\u00b5", "µ")


def _tidy(number: float) -> float:
    """Round away binary noise from a unit conversion (108.3 nm is 0.1083 µm, not 0.10830000000000001)."""
    return float(f"{number:.12g}")


def _rational(value: Any) -> float | None:
    try:
        num, den = value
        return float(num) / float(den) if float(den) else None
    except (TypeError, ValueError):
        try:
            return float(value)
        except (TypeError, ValueError):
            return None


# -- where each format keeps its facts --------------------------------------------------------------


def _tiff_facts(path: str, scene: int, facts: dict[str, Any], plugin: str) -> None:
    import tifffile

    with tifffile.TiffFile(path) as tif:
        if tif.is_ome and tif.ome_metadata:
            facts["format"] = f"OME-TIFF via {plugin}"
            _ome_xml_facts(tif.ome_metadata, scene, facts)
            return
        page = tif.pages.first
        if tif.is_imagej:
            facts["format"] = f"ImageJ TIFF via {plugin}"
            _imagej_facts(tif.imagej_metadata or {}, page, facts)
            return
        facts["format"] = f"TIFF via {plugin}"
        _resolution_tag_facts(page, facts)


def _ome_xml_facts(xml: str, scene: int, facts: dict[str, Any]) -> None:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    images = [el for el in root if el.tag.rsplit("}", 1)[-1] == "Image"]
    if scene >= len(images):
        return
    pixels = next((el for el in images[scene] if el.tag.rsplit("}", 1)[-1] == "Pixels"), None)
    if pixels is None:
        return
    size: list[float | None] = []
    for axis in "ZYX":
        raw = pixels.get(f"PhysicalSize{axis}")
        # the OME schema's default unit is the micrometre
        unit = pixels.get(f"PhysicalSize{axis}Unit", "µm")
        value = length_um(raw, unit)
        size.append(value)
        if value is not None:
            facts["sources"][f"pixel_size_{axis.lower()}"] = f"OME-XML PhysicalSize{axis}={raw} {unit}"
    facts["pixel_size_um"] = (size[0], size[1], size[2])
    raw_t = pixels.get("TimeIncrement")
    if raw_t is not None:
        unit = pixels.get("TimeIncrementUnit", "s")
        facts["time_interval_s"] = time_s(raw_t, unit)
        if facts["time_interval_s"] is not None:
            facts["sources"]["time_interval"] = f"OME-XML TimeIncrement={raw_t} {unit}"
    if facts["time_interval_s"] is None:
        _delta_t_facts(pixels, facts)
    names = [el.get("Name") for el in pixels if el.tag.rsplit("}", 1)[-1] == "Channel"]
    if any(names):
        facts["channel_names"] = [n or "" for n in names]
        facts["sources"]["channel_names"] = "OME-XML Channel Name"


def _delta_t_facts(pixels: Any, facts: dict[str, Any]) -> None:
    """The frame interval from the planes' ``DeltaT`` (what many converters write instead of
    ``TimeIncrement``): the median step between time points of the first channel and z plane."""
    times: dict[int, float] = {}
    unit = "s"
    for el in pixels:
        if el.tag.rsplit("}", 1)[-1] != "Plane" or el.get("DeltaT") is None:
            continue
        if el.get("TheC", "0") != "0" or el.get("TheZ", "0") != "0":
            continue
        unit = el.get("DeltaTUnit", "s")
        seconds = time_s(el.get("DeltaT"), unit) if float(el.get("DeltaT", "0")) > 0 else 0.0
        if seconds is not None:
            times[int(el.get("TheT", "0"))] = seconds
    ordered = [times[t] for t in sorted(times)]
    steps = sorted(b - a for a, b in itertools.pairwise(ordered) if b > a)
    if len(steps) == len(ordered) - 1 and steps:
        facts["time_interval_s"] = _tidy(steps[len(steps) // 2])
        facts["sources"]["time_interval"] = f"OME-XML Plane DeltaT ({len(ordered)} time points, {unit}; median step)"


def _imagej_facts(meta: dict[str, Any], page: Any, facts: dict[str, Any]) -> None:
    unit = meta.get("unit")
    xres = _rational(page.tags["XResolution"].value) if "XResolution" in page.tags else None
    yres = _rational(page.tags["YResolution"].value) if "YResolution" in page.tags else None
    y = length_um(1.0 / yres, unit) if yres else None
    x = length_um(1.0 / xres, unit) if xres else None
    z = length_um(meta.get("spacing"), unit)
    facts["pixel_size_um"] = (z, y, x)
    if x is not None:
        facts["sources"]["pixel_size_x"] = f"ImageJ XResolution {page.tags['XResolution'].value} per {unit}"
    if y is not None:
        facts["sources"]["pixel_size_y"] = f"ImageJ YResolution {page.tags['YResolution'].value} per {unit}"
    if z is not None:
        facts["sources"]["pixel_size_z"] = f"ImageJ spacing={meta.get('spacing')} {unit}"
    if unit is None or length_um(1.0, unit) is None:
        facts["notes"].append(f"ImageJ calibration unit is {unit!r}, not a length: the image is uncalibrated")
    interval = meta.get("finterval")
    facts["time_interval_s"] = time_s(interval, meta.get("tunit", "s")) if interval else None
    if facts["time_interval_s"] is not None:
        facts["sources"]["time_interval"] = f"ImageJ finterval={interval} {meta.get('tunit', 's')}"


def _resolution_tag_facts(page: Any, facts: dict[str, Any]) -> None:
    tags = page.tags
    unit_tag = tags.get("ResolutionUnit")
    unit = int(unit_tag.value) if unit_tag is not None else 2  # the TIFF default is the inch
    per = {3: "cm", 4: "mm", 5: "µm"}.get(unit)
    if per is None:
        if "XResolution" in tags and unit == 2:
            facts["notes"].append("the TIFF's resolution is in dots per inch (a print setting), not a pixel size")
        return
    sizes = []
    for axis in "YX":
        tag = tags.get(f"{axis}Resolution")
        res = _rational(tag.value) if tag is not None else None
        value = length_um(1.0 / res, per) if res else None
        sizes.append(value)
        if value is not None:
            facts["sources"][f"pixel_size_{axis.lower()}"] = f"TIFF {axis}Resolution {tag.value} per {per}"
    facts["pixel_size_um"] = (None, sizes[0], sizes[1])


def _zarr_root(path: str) -> bool:
    return os.path.isdir(path) and (
        os.path.isfile(os.path.join(path, "zarr.json")) or os.path.isfile(os.path.join(path, ".zattrs"))
    )


def _array_meta(path: str) -> tuple[tuple[int, ...], str] | None:
    """Shape and dtype of the zarr array at ``path``, from its JSON (v3 ``zarr.json``, v2 ``.zarray``)."""
    try:
        v3 = os.path.join(path, "zarr.json")
        if os.path.isfile(v3):
            with open(v3, encoding="utf-8") as fh:
                meta = json.load(fh)
            return tuple(int(n) for n in meta["shape"]), str(meta["data_type"])
        with open(os.path.join(path, ".zarray"), encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    typestr = str(meta.get("dtype", ""))
    kinds = {"u": "uint", "i": "int", "f": "float", "c": "complex"}
    if typestr[1:2] == "b":
        return tuple(int(n) for n in meta["shape"]), "bool"
    if typestr[1:2] not in kinds or not typestr[2:].isdigit():
        return None
    return tuple(int(n) for n in meta["shape"]), f"{kinds[typestr[1]]}{8 * int(typestr[2:])}"


def _open_zarr(path: str, scene: int | str | None, level: int, lazy: bool | None) -> ImageFile | None:
    """An OME-Zarr opened from its JSON alone; bioio reads the pixels when they are first asked
    for. None when the store is not a plain multiscales image (bioio then tries it whole)."""
    if importlib.util.find_spec("bioio_ome_zarr") is None or importlib.util.find_spec("bioio") is None:
        raise _missing("bioio-ome-zarr", "OME-Zarr")
    attrs, _ = _zarr_attrs(path)
    multiscales = [m for m in attrs.get("multiscales") or [] if isinstance(m, dict)]
    if not multiscales:
        return None
    scenes = [str(m.get("name") or f"Image:{i}") for i, m in enumerate(multiscales)]
    index = _scene_index(scene, scenes, path)
    ms = multiscales[index]
    axes = [a if isinstance(a, dict) else {"name": a} for a in ms.get("axes", [])]
    dims = "".join(str(a.get("name", "?")).upper() for a in axes)
    metas = [_array_meta(os.path.join(path, str(d.get("path", "")))) for d in ms.get("datasets", [])]
    if not metas or any(m is None or len(m[0]) != len(dims) for m in metas):
        return None
    levels = list(range(len(metas)))
    if level not in levels:
        raise ValueError(f"{os.path.basename(path)} has pyramid levels {levels}; level {level} is not one of them.")
    chosen = metas[level]
    assert chosen is not None  # every level was checked above
    shape, dtype = chosen
    facts: dict[str, Any] = {
        "path": path,
        "format": "",
        "dims": dims,
        "shape": shape,
        "dtype": dtype,
        "pixel_size_um": (None, None, None),
        "channel_names": [],
        "time_interval_s": None,
        "scenes": scenes,
        "scene": scenes[index],
        "level": level,
        "level_shapes": [m[0] for m in metas if m is not None],  # all of them: checked above
        "sources": {},
        "notes": [],
    }
    _zarr_facts(path, index, level, facts, "bioio-ome-zarr")
    if lazy is None:
        lazy = math.prod(shape) * _itemsize(dtype) > int(_config["lazy_above_bytes"])

    def reader() -> Any:
        import warnings

        import bioio
        from bioio_ome_zarr import Reader as ZarrReader

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            image = bioio.BioImage(path, reader=ZarrReader)
        if index:
            image.set_scene(index)
        if level:
            image.set_resolution_level(level)
        return image.reader

    return ImageFile(reader, facts, bool(lazy))


def _zarr_facts(path: str, scene: int, level: int, facts: dict[str, Any], plugin: str) -> None:
    attrs, version = _zarr_attrs(path)
    multiscales = attrs.get("multiscales") or []
    facts["format"] = f"OME-Zarr (NGFF {version or '?'}) via {plugin}"
    if not multiscales:
        return
    ms = multiscales[min(scene, len(multiscales) - 1)]
    axes = [a if isinstance(a, dict) else {"name": a} for a in ms.get("axes", [])]
    datasets = ms.get("datasets", [])
    if level >= len(datasets):
        return
    scale = [1.0] * len(axes)
    for transforms in (datasets[level].get("coordinateTransformations", []), ms.get("coordinateTransformations", [])):
        for t in transforms:
            if t.get("type") == "scale":
                scale = [s * f for s, f in zip(scale, t.get("scale", []), strict=False)]
    by_name = {str(a.get("name", "")).lower(): (a, s) for a, s in zip(axes, scale, strict=False)}
    size: list[float | None] = []
    for axis in "zyx":
        ax, value = by_name.get(axis, ({}, None))
        # a scale with no unit is not a physical size (writers put 1.0 there by default)
        um = length_um(value, ax.get("unit")) if value is not None else None
        size.append(um)
        if um is not None:
            facts["sources"][f"pixel_size_{axis}"] = f"NGFF scale {value} {ax.get('unit')} (level {level})"
    facts["pixel_size_um"] = (size[0], size[1], size[2])
    t_ax, t_value = by_name.get("t", ({}, None))
    if t_value is not None:
        facts["time_interval_s"] = time_s(t_value, t_ax.get("unit"))
        if facts["time_interval_s"] is not None:
            facts["sources"]["time_interval"] = f"NGFF scale {t_value} {t_ax.get('unit')}"
    channels = (attrs.get("omero") or {}).get("channels") or []
    names = [str(c.get("label") or "") for c in channels if isinstance(c, dict)]
    if any(names):
        facts["channel_names"] = names
        facts["sources"]["channel_names"] = "OME-Zarr omero channel labels"


def _zarr_attrs(path: str) -> tuple[dict[str, Any], str]:
    """The group attributes of an OME-Zarr root (zarr v3's ``zarr.json`` under ``ome``, or v2's
    ``.zattrs``) and its NGFF version."""
    v3 = os.path.join(path, "zarr.json")
    if os.path.isfile(v3):
        with open(v3, encoding="utf-8") as fh:
            attrs = json.load(fh).get("attributes", {})
        ome = attrs.get("ome", attrs)
        return ome, str(ome.get("version", ""))
    v2 = os.path.join(path, ".zattrs")
    if os.path.isfile(v2):
        with open(v2, encoding="utf-8") as fh:
            attrs = json.load(fh)
        ms = attrs.get("multiscales") or [{}]
        return attrs, str(ms[0].get("version", ""))
    return {}, ""


def _reader_facts(image: Any, facts: dict[str, Any], plugin: str) -> None:
    """Vendor files: what the reader reports, minus its defaults."""
    facts["format"] = f"{_suffix(facts['path']).lstrip('.').upper()} via {plugin}"
    sizes = image.physical_pixel_sizes
    raw = [sizes.Z, sizes.Y, sizes.X]
    size: list[float | None] = [float(v) if v is not None and float(v) > 0 else None for v in raw]
    if plugin == "bioio-nd2":
        size = _nd2_calibrated(facts["path"], size)
    elif size[1] == 1.0 and size[2] == 1.0:
        # readers fall back to 1.0 when a file has no calibration; a real 1 µm pixel is rare
        facts["notes"].append(f"{plugin} reported 1.0 for the pixel size, its default for an uncalibrated file")
        size = [None, None, None]
    facts["pixel_size_um"] = (size[0], size[1], size[2])
    for axis, value in zip("zyx", size, strict=True):
        if value is not None:
            facts["sources"][f"pixel_size_{axis}"] = f"{plugin} (the vendor metadata, in µm)"
    try:
        interval = image.time_interval
    except Exception:  # a reader's metadata parser failing must not stop an open
        interval = None
    seconds = getattr(interval, "total_seconds", None)
    facts["time_interval_s"] = float(seconds()) if callable(seconds) and seconds() > 0 else None
    if facts["time_interval_s"] is not None:
        facts["sources"]["time_interval"] = f"{plugin} (the vendor metadata)"
    names = [str(n) for n in (image.channel_names or [])]
    if names and not all(_PLACEHOLDER_CHANNEL.match(n) for n in names):
        facts["channel_names"] = names
        facts["sources"]["channel_names"] = f"{plugin} channel names"


def _nd2_calibrated(path: str, size: list[float | None]) -> list[float | None]:
    """ND2 answers 1.0 for an axis it has no calibration for; its metadata says which are real."""
    try:
        import nd2

        with nd2.ND2File(path) as f:
            channels = f.metadata.channels or []
            flags = channels[0].volume.axesCalibrated if channels else (False, False, False)
    except Exception:  # unreadable metadata: nothing is known to be calibrated
        return [None, None, None]
    x_ok, y_ok, z_ok = (bool(v) for v in flags)
    return [size[0] if z_ok else None, size[1] if y_ok else None, size[2] if x_ok else None]


# -- the repr -------------------------------------------------------------------------------------


def _itemsize(dtype: str) -> int:
    digits = re.findall(r"\d+", dtype)
    if dtype == "bool" or not digits:
        return 1
    bits = int(digits[-1])
    return max(1, bits // 8) * (2 if dtype.startswith("complex") and bits < 64 else 1)


def _human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _describe(im: ImageFile) -> str:
    name = os.path.basename(os.path.normpath(im.path))
    lines = [f"ImageFile {name!r}: {im.format}"]
    if len(im.scenes) > 1:
        lines.append(
            f"  scene {im.scenes.index(im.scene)} of {len(im.scenes)} ({im.scene!r}); scenes: {_short(im.scenes)}"
        )
    where = "lazy dask array (compute a crop or a projection)" if im.lazy else "numpy, read on first use"
    lines.append(f"  shape {im.shape} dims {im.dims!r} {im.dtype}, {_human(im.nbytes)}; .data: {where}")
    if len(im.level_shapes) > 1:
        lines.append(
            f"  pyramid level {im.level} of {len(im.level_shapes)}: {' | '.join(str(s) for s in im.level_shapes)}"
        )
    z, y, x = im.pixel_size_um
    parts = [
        f"{axis} {v:g} µm" if v is not None else f"{axis} not recorded"
        for axis, v in zip("zyx", (z, y, x), strict=True)
    ]
    lines.append("  pixel size: " + ", ".join(parts))
    lines.append(
        "  channels: " + (", ".join(repr(n) for n in im.channel_names) if im.channel_names else "not named in the file")
    )
    t = "not recorded" if im.time_interval_s is None else f"{im.time_interval_s:g} s"
    if ("T" in im.dims and im.shape[im.dims.index("T")] > 1) or im.time_interval_s is not None:
        lines.append(f"  time interval: {t}")
    missing = [f"{a} pixel size" for a, v in zip("yx", (y, x), strict=True) if v is None]
    if "Z" in im.dims and im.shape[im.dims.index("Z")] > 1 and z is None:
        missing.append("z step")
    if "T" in im.dims and im.shape[im.dims.index("T")] > 1 and im.time_interval_s is None:
        missing.append("frame interval")
    if missing:
        lines.append(f"  missing: {', '.join(missing)} (the file does not record it: ask the user, do not assume 1)")
    lines.extend(f"  note: {n}" for n in im.notes)
    if im.sources:
        lines.append("  read from: " + "; ".join(dict.fromkeys(im.sources.values())))
    return "\n".join(lines)


def _short(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" … ({len(names) - limit} more)" if len(names) > limit else "")


def install(ns: dict[str, Any]) -> None:
    """Bootstrap entry: read the config, put ``open_image`` in the namespace."""
    raw = os.environ.pop(CONFIG_ENV, "")
    if raw:
        _config.update(json.loads(raw))
    ns["open_image"] = open_image
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def restore_name(_info: Any) -> None:
        # %reset empties the namespace; the helper must outlive it like the kernel's own names
        shell.user_ns.setdefault("open_image", open_image)

    shell.events.register("pre_run_cell", restore_name)
