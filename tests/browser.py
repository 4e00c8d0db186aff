"""Opening a page in a real browser: headless Chromium from the system's packages (Debian's `chromium`,
which `.ci/run` installs). Without it a test skips, except under CI (CI=true), where it fails."""

import os
import re
import shutil
import subprocess
import tempfile

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium() -> str:
    """The Chromium executable; skips the test (fails it under CI) when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = "headless Chromium is not installed (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def loaded_dom(path, budget_ms: int = 8000) -> str:
    """The DOM of the local page `path` after it loaded and its scripts ran (`--dump-dom`)."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                               "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def body_data(dom: str, key: str):
    """The value of the body's data-KEY attribute in a dumped DOM, or None."""
    found = re.search(rf'<body[^>]*\bdata-{key}="([^"]*)"', dom)
    return found.group(1) if found else None
