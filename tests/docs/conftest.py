"""The documentation site, built once per test run and shared by the tests that read it (the strict build's
test and the navigation tests): the test workers of `pytest -n 2` take a lock, and the first one builds."""

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """(the build's exit status and output, the site's folder): `mkdocs build --strict` of the working tree."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's folder, which the workers share
    site, record = root / "docs-site", root / "docs-site.json"
    with open(root / "docs-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                                  cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
            record.write_text(json.dumps({"returncode": done.returncode, "output": done.stdout + done.stderr}))
    build = json.loads(record.read_text())
    return build, site


@pytest.fixture
def site(built_site):
    """The built site's folder; fails with the build's output when the build failed."""
    build, folder = built_site
    if build["returncode"] != 0:
        pytest.fail("mkdocs build --strict failed:\n" + build["output"])
    return folder
