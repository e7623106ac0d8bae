"""timelapse-intensity across its validated range: bleach rate and F/F0 against the generated truth.

The ROI carries a step response after the baseline on top of exponential bleaching; the
reference region bleaches the same way without responding; a cell-free region gives the
background. The fit-residual gate must stay quiet on noise and speak on a two-component decay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, Outputs, replace_once, run_doc

pytestmark = pytest.mark.slow

PRODUCES = ["bleach_rate_per_s", "f_over_f0", "times_s", "notes"]


def make(
    seed: int,
    n_t: int = 40,
    dt: float = 2.0,
    k: float = 0.015,
    step_at: int = 20,
    response: float = 1.3,
    signal: float = 500.0,
    noise: float = 5.0,
    with_reference: bool = True,
    fast: float = 0.0,
    dtype: Any = np.uint16,
    derive_background: bool = False,
) -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(seed)
    shape = (48, 64)
    t = np.arange(n_t) * dt
    roi = np.zeros(shape, bool)
    roi[5:15, 5:15] = True
    ref = np.zeros(shape, bool)
    ref[5:15, 30:40] = True
    bg = np.zeros(shape, bool)
    bg[30:45, 45:60] = True
    decay = (1 - fast) * np.exp(-k * t) + fast * np.exp(-10 * k * t)  # fast > 0: a second component
    steps = 1 + (response - 1) * (np.arange(n_t) >= step_at)
    movie = np.full((n_t, *shape), 100.0)
    movie[:, roi] += (signal * decay * steps)[:, None]
    movie[:, ref] += (0.8 * signal * decay)[:, None]
    movie += rng.normal(0, noise, movie.shape)
    if np.issubdtype(dtype, np.integer):
        movie = np.round(np.clip(movie, 0, None))
    inputs: Inputs = {
        "movie": movie.astype(dtype),
        "roi": roi,
        "background_roi": None if derive_background else bg,
        "reference_roi": ref if with_reference else None,
        "frame_interval_s": dt,
        "baseline_frames": step_at,
    }
    return inputs, {"k": k, "step_at": step_at, "response": response}


def check(out: Outputs, truth: dict[str, Any]) -> None:
    k = float(out["bleach_rate_per_s"])
    assert abs(k - truth["k"]) <= max(0.03 * truth["k"], 5e-4), f"bleach rate {k:.5f}/s vs {truth['k']}"
    f, s = out["f_over_f0"], truth["step_at"]
    assert abs(f[:s].mean() - 1) <= 0.03, f"baseline F/F0 {f[:s].mean():.3f}"
    assert abs(f[s:].mean() - truth["response"]) <= 0.03, f"response F/F0 {f[s:].mean():.3f} vs {truth['response']}"


CONDITIONS = [
    ("step-response-40-frames", 501, {}, []),
    ("no-bleaching", 502, {"k": 0.0, "response": 1.5}, []),
    (
        "85pct-bleached-noisy-200-frames",
        503,
        {"n_t": 200, "dt": 1.0, "k": 0.0095, "step_at": 50, "noise": 20.0},
        ["over 75% bleached"],
    ),
    ("10-frames-doubling", 504, {"n_t": 10, "step_at": 4, "response": 2.0, "k": 0.03}, []),
    ("low-snr-float", 505, {"signal": 100.0, "noise": 20.0, "dtype": np.float32, "response": 1.2}, []),
    ("no-reference-no-response", 506, {"with_reference": False, "response": 1.0, "k": 0.012}, []),
    ("background-area-derived", 507, {"derive_background": True, "noise": 20.0}, []),
]


@pytest.mark.parametrize(
    ("seed", "kwargs", "expected_notes"), [c[1:] for c in CONDITIONS], ids=[c[0] for c in CONDITIONS]
)
def test_timelapse_sweep(
    kernel: seedlib.KernelRunner, tmp_path: Path, seed: int, kwargs: dict[str, Any], expected_notes: list[str]
) -> None:
    inputs, truth = make(seed, **kwargs)
    out = run_doc(kernel, "timelapse-intensity", inputs, PRODUCES, tmp_path)
    check(out, truth)
    notes = [str(n) for n in out["notes"]]
    assert len(notes) == len(expected_notes) and all(e in n for e, n in zip(expected_notes, notes, strict=True)), notes


def test_two_component_decay_is_flagged(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make(507, fast=0.3)
    out = run_doc(kernel, "timelapse-intensity", inputs, PRODUCES, tmp_path)
    assert any("not a single exponential" in str(n) and "check the reference region" in str(n) for n in out["notes"])


def test_reference_at_background_stops(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make(508)
    inputs["reference_roi"] = inputs["background_roi"]
    with pytest.raises(seedlib.KernelError, match="reference drops to background"):
        run_doc(kernel, "timelapse-intensity", inputs, PRODUCES, tmp_path)


def test_sweep_fails_without_the_bleach_correction(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (the trace is not divided by the fitted bleaching): the check fails."""
    inputs, truth = make(501)
    edit = replace_once("trace_corrected = trace / bleach", "trace_corrected = trace")
    out = run_doc(kernel, "timelapse-intensity", inputs, PRODUCES, tmp_path, edit=edit)
    with pytest.raises(AssertionError, match="F/F0"):
        check(out, truth)
