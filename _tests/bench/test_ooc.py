"""`python -m bench ooc`'s reporting: a throughput always carries its load, a busy machine is said."""

from __future__ import annotations

from bench.ooc import LoadMeter, load_warning, throughput_line


def test_a_load_above_the_core_count_is_a_warning_and_one_at_it_is_not() -> None:
    assert load_warning(2.0, 2) is None
    warning = load_warning(5.3, 2)
    assert warning is not None and "load reached 5.3 on 2 cores:" in warning and "understate" in warning


def test_during_the_run_its_own_workers_and_kernel_count_before_the_warning() -> None:
    assert load_warning(4.5, 2, own=3) is None  # 2 workers and the kernel keep 3 processes busy
    warning = load_warning(6.0, 2, own=3)
    assert warning is not None and "own 3 busy processes included" in warning


def test_the_throughput_line_carries_the_load_and_the_meter_keeps_the_peak() -> None:
    meter = LoadMeter()
    now = meter()
    assert now.startswith("load ") and meter.peak >= 0.0
    figures = {"cluster_mb_s": 24.0, "with_copy_mb_s": 9.1, "numpy_mb_s": 16.0, "numpy_crop_mb": 16.8, "cores": 2}
    line = throughput_line(figures, 6, 59.2, now)
    assert line.startswith("throughput: cluster 24.00 MB/s") and line.endswith(f"({now})")
    assert "1.50x one process, 75% of the machine's floor (2 cores" in line


def test_the_open_image_run_measures_both_rates_beside_the_load_and_checks_the_projection(tmp_path) -> None:
    """``ooc --open-image`` at a tiny size: it runs, its figures have their shape, its check holds."""
    from bench.ooc_open import run

    lines: list[str] = []
    figures = run(512, 16, tmp_path, rounds=1, out=lines.append)
    assert figures["mip_equal"] is True
    assert len(figures["raw_read_mb_s"]) == len(figures["mip_mb_s"]) == 1 and figures["mip_vs_raw_median"] > 0
    assert figures["open_repr_cold_mb"] < 100
    assert all("(load " in line for line in lines if "MB/s" in line and not line.startswith("WARNING"))
