"""The package's metadata builds without deprecation warnings (issue 52): the licence in SPDX form (PEP 639),
which setuptools 77 and newer read; the table form `{ text = ... }` stops building in February 2027."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_license_is_an_spdx_expression_and_the_build_backend_reads_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    (setuptools,) = [r for r in project["build-system"]["requires"] if r.startswith("setuptools")]
    assert setuptools == "setuptools>=77"
