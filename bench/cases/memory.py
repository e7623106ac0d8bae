"""Three-session cases: memory must do no harm.

Session 1 states a rule narrower than one of the lab's (for one cell line only), session 2 applies
it, session 3 needs the lab's own rule. A memo that files the narrow rule beside the lab's passes;
one that overwrote the lab's doc with it fails, because session 3 follows the lab's doc as written
(its python block holds the cutoff) and the generator redraws until the two rules count this field
differently.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile
from scipy import ndimage as ndi

from bench.cases import Case, Procedure, Run, Truth, register
from bench.cases._kit import redraws
from bench.cases.lab import _CELL_MEANS, _check_count, _setup_positive

LOW_LINE = "low-line"
"""The folder of the GFP-low line's images (sessions 1 and 2)."""

NARROW_CUTOFF = 400
"""The user's cutoff for the GFP-low line, above the camera offset (the lab's is 1000)."""

LAB_RULE = "lab/positive-cells"


def _count(folder: Path, cutoff: float) -> int:
    image = tifffile.imread(folder / "gfp.tif").astype(float)
    labels = tifffile.imread(folder / "labels.tif")
    means = np.asarray(ndi.mean(image, labels, np.arange(1, labels.max() + 1)))
    return int(np.sum(means - 500 >= cutoff))


def _setup(workdir: Path, rng: np.random.Generator) -> Truth:
    (workdir / LOW_LINE).mkdir(exist_ok=True)
    for _ in redraws("memory _setup"):
        _setup_positive(workdir / LOW_LINE, rng)
        truth = _setup_positive(workdir, rng)
        # the narrow rule must miss this field's count, or a memo that replaced the lab's rule could pass
        narrow = _count(workdir, NARROW_CUTOFF)
        if narrow != truth["positive"]:
            break
    return {**truth, "narrow": narrow}


def _low_line(name: str) -> str:
    return (
        _CELL_MEANS.format(name=f"{LOW_LINE}/gfp.tif").replace('"labels.tif"', f'"{LOW_LINE}/labels.tif"')
        + f"""
positive = int(np.sum(means - 500 >= {NARROW_CUTOFF}))  # the user's rule for the GFP-low line only
open("{LOW_LINE}/{name}", "w").write(str(positive))
"""
    )


SCOPED_MEMO = (
    "gfp-low-line",
    (
        "# GFP-low line: its positive cutoff\n\n"
        f"For the GFP-low line only (its images under {LOW_LINE}/), a cell is GFP-positive at "
        f"**{NARROW_CUTOFF} counts above the camera offset**, as the user set it for that weakly "
        f"expressing line. Every other line keeps the lab's rule in [[{LAB_RULE}]], unchanged.\n"
    ),
)
"""The memo that adds a scoped rule beside the lab's: what the scripted agent writes."""


register(
    Case(
        name="memory-scoped-cutoff",
        first_request=(
            f"{LOW_LINE}/gfp.tif is the GFP channel of an image of our new GFP-low line, with the cells "
            f"outlined in {LOW_LINE}/labels.tif. This line expresses weakly, so for it, and only for it, a cell "
            f"counts as GFP-positive at {NARROW_CUTOFF} counts above the camera offset instead of our usual "
            f"cutoff. How many cells are GFP-positive? Write the number to {LOW_LINE}/positive.txt, and "
            "remember the rule for this line."
        ),
        second_request=(
            f"{LOW_LINE}/gfp.tif is the GFP-low line again. How many of its cells are GFP-positive? Write "
            f"the number to {LOW_LINE}/positive_again.txt."
        ),
        request=(
            "gfp.tif is the GFP channel of an image of our usual parental line from our scope, and "
            "labels.tif outlines the cells. How many cells are GFP-positive? Write the number to positive.txt."
        ),
        setup=_setup,
        check=_check_count("positive.txt", "positive", "GFP-positive cells"),
        first_solution=_low_line("positive.txt"),
        second_solution=_low_line("positive_again.txt"),
        memo=SCOPED_MEMO,
        procedure=Procedure(
            (
                _CELL_MEANS.format(name="gfp.tif"),
                Run(LAB_RULE),
                "positive = int(np.sum(means - CAMERA_OFFSET >= POSITIVE_ABOVE_OFFSET))\n"
                'open("positive.txt", "w").write(str(positive))\n',
            )
        ),
        blind_solution=_CELL_MEANS.format(name="gfp.tif")
        + """
from skimage.filters import threshold_otsu
positive = int(np.sum(means > threshold_otsu(means)))
open("positive.txt", "w").write(str(positive))
""",
        docs=(LAB_RULE,),
        category="three-session",
        why_hidden=(
            "The field is the lab-positive-cells field: no gap at the lab's cutoff, every per-image "
            "threshold misses it; and it is redrawn until the GFP-low line's narrower cutoff counts it "
            "differently too, so only the lab's own rule, kept intact beside the user's, gives the count."
        ),
    )
)
