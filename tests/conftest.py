"""Shared fixtures: float64 on demand, without leaking x64 into other tests."""

import jax
import pytest


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats enabled (gradient checks)."""
    with jax.enable_x64(True):
        yield
