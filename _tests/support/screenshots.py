"""Pictures the tests take of what a person sees, and how they reach the guide.

A test that exercises a screen (the notebook in a browser, the console in a terminal, a bench
report) takes its picture on every run and checks what it rendered; with
``BIOPB_UPDATE_SCREENSHOTS=1`` it also replaces the guide's copy in ``docs/``, so the guide shows
what the code does today and a picture is never drawn by hand.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

GUIDE = Path(__file__).resolve().parents[2] / "docs"
"""The guide's source folder, where its pictures live beside the pages."""

UPDATE_ENV = "BIOPB_UPDATE_SCREENSHOTS"


def keep_for_guide(picture: Path, name: str) -> None:
    """Copy ``picture`` to ``docs/<name>`` when ``BIOPB_UPDATE_SCREENSHOTS=1``; otherwise leave the guide alone."""
    if os.environ.get(UPDATE_ENV) == "1":
        shutil.copyfile(picture, GUIDE / name)


def chromium() -> tuple[str, str]:
    """The system's headless browser and its driver; skip (fail under ``BIOPB_REQUIRE_LIVE=1``) without."""
    browser = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        browser = None
    if browser is None or driver is None:
        why = (
            "needs chromium, chromedriver and selenium: apt-get install chromium chromium-driver; pip install selenium"
        )
        if os.environ.get("BIOPB_REQUIRE_LIVE") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return browser, driver


def open_chromium(profile: Path, width: int, height: int) -> Chrome:
    """A headless Chromium with a window of ``width`` × ``height`` and a profile of its own; quit it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)
