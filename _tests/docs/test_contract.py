"""Contract: installed packages satisfy each doc's pins, and every API the docs quote still exists."""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet  # a pytest dependency, so always importable here
from packaging.version import Version

from _tests.support import seedlib

PINNED = [d for d in seedlib.shipped_ids() if seedlib.split_frontmatter(seedlib.read(d))[0].get("packages")]
WITH_CODE = [d for d in seedlib.shipped_ids() if seedlib.code_blocks(seedlib.read(d))]

# Pins the extraction cannot see: attributes of objects (not modules) and names quoted in prose.
HAND_PINS = [
    "tifffile.TiffFile.series",
    "tifffile.TiffFile.ome_metadata",
    "tifffile.TiffFile.imagej_metadata",
    "tifffile.TiffFile.is_ome",
    "tifffile.TiffPageSeries.axes",
    "tifffile.TiffPageSeries.shape",
    "tifffile.TiffPageSeries.dtype",
    "tifffile.TiffPageSeries.pages",
    "tifffile.TiffPageSeries.asarray",
    "tifffile.TiffPage.asarray",
    "skimage.restoration.rolling_ball",
    "skimage.restoration.ellipsoid_kernel",
    "skimage.draw.circle_perimeter",
    "IPython.display.Image",
    "IPython.display.display",
]
# Keywords quoted by hand (calls the extraction sees as methods of objects).
HAND_KEYWORDS = {
    "tifffile.imread": ["key", "aszarr"],
    "skimage.restoration.rolling_ball": ["radius", "kernel"],
    "skimage.morphology.disk": ["decomposition"],
    "skimage.registration.phase_cross_correlation": ["upsample_factor", "disambiguate"],
}


def resolve(dotted: str) -> Any:
    """Import the longest importable module prefix, then getattr the rest."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(f"no importable prefix in {dotted}")


def check_keywords(dotted: str, obj: Any, keywords: list[str] | tuple[str, ...]) -> list[str]:
    """Keywords a signature does not accept, or accepts only as deprecated."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    params = sig.parameters
    problems = []
    for kw in keywords:
        p = params.get(kw)
        if p is None:
            if not any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values()):
                problems.append(f"{dotted}({kw}=...): no such keyword")
        elif "DEPRECATED" in repr(p.default):
            problems.append(f"{dotted}({kw}=...): keyword is deprecated")
    return problems


def _instance_owner(dotted: str) -> str | None:
    """TiffFile flags and TiffPageSeries fields exist per instance: check a real file instead."""
    for cls in ("tifffile.TiffFile.", "tifffile.TiffPageSeries."):
        if dotted.startswith(cls):
            return cls
    return None


@pytest.mark.parametrize("doc_id", PINNED)
def test_installed_versions_satisfy_the_pins(doc_id: str) -> None:
    meta, _ = seedlib.split_frontmatter(seedlib.read(doc_id))
    for name, spec in seedlib.parse_packages(meta["packages"]):
        try:
            installed = version(name)
        except PackageNotFoundError:
            pytest.fail(f"{doc_id} pins {name}{spec}, which is not installed (install the imaging extra)")
        assert Version(installed) in SpecifierSet(spec), f"{doc_id}: {name} {installed} does not satisfy {spec}"


@pytest.mark.parametrize("doc_id", WITH_CODE)
def test_every_quoted_api_resolves(doc_id: str) -> None:
    text = seedlib.read(doc_id)
    code = "\n".join(seedlib.code_blocks(text))
    aliases = seedlib.import_aliases(code)
    refs = seedlib.api_refs(code, aliases) + seedlib.inline_api_refs(text, aliases)
    problems: list[str] = []
    for ref in refs:
        try:
            obj = resolve(ref.dotted)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{ref.as_written} -> {ref.dotted}: {exc}")
            continue
        problems += check_keywords(ref.dotted, obj, ref.keywords)
    assert not problems, f"{doc_id}: " + "; ".join(problems)


@pytest.mark.parametrize("doc_id", WITH_CODE)
def test_quoted_packages_are_pinned(doc_id: str) -> None:
    """A doc that imports a third-party package pins it (the pin is what the version check keys off)."""
    meta, _ = seedlib.split_frontmatter(seedlib.read(doc_id))
    pinned = {n for n, _ in seedlib.parse_packages(meta.get("packages", ""))}
    dist = {"numpy": "numpy", "scipy": "scipy", "skimage": "scikit-image", "tifffile": "tifffile", "imageio": "imageio"}
    code = "\n".join(seedlib.code_blocks(seedlib.read(doc_id)))
    used = {dist[t.split(".")[0]] for t in seedlib.import_aliases(code).values() if t.split(".")[0] in dist}
    assert used <= pinned, f"{doc_id} imports {sorted(used - pinned)} without a packages: pin"


def test_hand_pins_resolve(tmp_path: Any) -> None:
    import numpy as np
    import tifffile

    path = tmp_path / "x.ome.tif"
    tifffile.imwrite(path, np.zeros((2, 8, 8), np.uint16), metadata={"axes": "ZYX"})
    with tifffile.TiffFile(path) as tf:
        series = tf.series[0]
        for dotted in HAND_PINS:
            owner = _instance_owner(dotted)
            if owner is not None:
                instance = tf if owner == "tifffile.TiffFile." else series
                assert hasattr(instance, dotted.rsplit(".", 1)[1]), dotted
            else:
                resolve(dotted)
        assert series.levels[0].shape == (2, 8, 8)  # pyramid levels, quoted by the data doc
    problems = [p for d, kws in HAND_KEYWORDS.items() for p in check_keywords(d, resolve(d), kws)]
    assert not problems, problems


def test_extraction_sees_aliases_keywords_and_deprecations() -> None:
    """The extractor resolves `from scipy import ndimage as ndi` and flags a deprecated keyword."""
    code = (
        "from scipy import ndimage as ndi\nfrom skimage import morphology\nimport numpy as np\n"
        "d = ndi.distance_transform_edt(m)\nmorphology.remove_small_objects(m, min_size=5)\nnp.nosuchthing(1)\n"
    )
    refs = {r.dotted: r for r in seedlib.api_refs(code, seedlib.import_aliases(code))}
    assert "scipy.ndimage.distance_transform_edt" in refs
    ref = refs["skimage.morphology.remove_small_objects"]
    assert check_keywords(ref.dotted, resolve(ref.dotted), ref.keywords) == [
        "skimage.morphology.remove_small_objects(min_size=...): keyword is deprecated"
    ]
    with pytest.raises(AttributeError):
        resolve(refs["numpy.nosuchthing"].dotted)


# ---------------------------------------------------------------- current names only

# roots a doc's prose may name without importing them in its code
_PROSE_ROOTS = {
    "numpy": "numpy",
    "np": "numpy",
    "scipy": "scipy",
    "ndi": "scipy.ndimage",
    "skimage": "skimage",
    "tifffile": "tifffile",
}


def deprecation_marker(obj: Any) -> str | None:
    """The library's own deprecation note on a callable: skimage's `deprecate_func` opens the
    docstring with '**Deprecated:**'; numpy and scipy put '.. deprecated::' before the parameters."""
    doc = inspect.getdoc(obj) or ""
    head = doc.split("Parameters\n")[0]
    for marker in ("**Deprecated:**", ".. deprecated::"):
        if marker in head:
            return " ".join(head[head.index(marker) :].split())[:160]
    return None


def deprecated_regionprops_names() -> dict[str, str]:
    """Old regionprops property names -> current ones, from scikit-image's own alias table.

    Only the snake_case aliases: the CamelCase ones ('Image', 'Label') are also ordinary names
    (`IPython.display.Image`) and no current code spells a property that way."""
    from skimage.measure._regionprops import PROPS

    return {old: new for old, new in PROPS.items() if old != new and old.islower()}


def quoted_names(text: str, code: str) -> set[str]:
    """Strings and attribute names in the code, and bare names or strings quoted inline in the prose."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    for span in seedlib._INLINE_CODE.findall(seedlib.prose(text)):
        names.add(span.strip().strip("'\""))
        names.update(part for part in span.replace("(", ".").split(".") if part.isidentifier())
    return names


def deprecated_uses(text: str) -> list[str]:
    """Every deprecated callable, keyword or regionprops property a doc's code or prose names."""
    code = "\n".join(seedlib.code_blocks(text))
    aliases = seedlib.import_aliases(code)
    refs = seedlib.api_refs(code, aliases) + seedlib.inline_api_refs(text, {**_PROSE_ROOTS, **aliases})
    problems: list[str] = []
    for ref in refs:
        try:
            obj = resolve(ref.dotted)
        except (ImportError, AttributeError):
            continue  # test_every_quoted_api_resolves reports it
        marker = deprecation_marker(obj)
        if marker:
            problems.append(f"{ref.as_written} -> {ref.dotted}: {marker}")
        problems += [p for p in check_keywords(ref.dotted, obj, ref.keywords) if p.endswith("deprecated")]
    old = deprecated_regionprops_names()
    problems += [
        f"regionprops property {n!r} is deprecated: use {old[n]!r}"
        for n in sorted(quoted_names(text, code))
        if n in old
    ]
    return sorted(set(problems))


@pytest.mark.parametrize("doc_id", seedlib.shipped_ids())
def test_docs_name_no_deprecated_api(doc_id: str) -> None:
    problems = deprecated_uses(seedlib.read(doc_id))
    assert not problems, f"{doc_id} names deprecated APIs: " + "; ".join(problems)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            (
                "```python\nfrom skimage import measure\n"
                "t = measure.regionprops_table(labels, image, properties=('label', 'mean_intensity'))\n```\n"
            ),
            "regionprops property 'mean_intensity' is deprecated: use 'intensity_mean'",
        ),
        (
            "```python\nfrom skimage import measure\nm = [p.mean_intensity for p in measure.regionprops(labels, image)]\n```\n",
            "regionprops property 'mean_intensity' is deprecated",
        ),
        ("Each region's `mean_intensity` is its average.\n", "regionprops property 'mean_intensity' is deprecated"),
        (
            "```python\nfrom skimage import morphology\nm = morphology.remove_small_objects(mask, min_size=5)\n```\n",
            "skimage.morphology.remove_small_objects(min_size=...): keyword is deprecated",
        ),
        (
            "Clean with `skimage.morphology.remove_small_objects(mask, min_size=5)`.\n",
            "skimage.morphology.remove_small_objects(min_size=...): keyword is deprecated",
        ),
        (
            "Then `skimage.morphology.binary_opening(mask, skimage.morphology.square(3))`.\n",
            "skimage.morphology.binary_opening: **Deprecated:**",
        ),
    ],
    ids=[
        "props-string",
        "props-attribute",
        "props-in-prose",
        "keyword-in-code",
        "keyword-in-prose",
        "function-in-prose",
    ],
)
def test_a_doc_naming_a_deprecated_api_fails(doc: str, expected: str) -> None:
    """The check reads the libraries' own deprecation markers and alias tables, in code and in prose."""
    problems = deprecated_uses(doc)
    assert any(expected in p for p in problems), problems
