"""Shared fixtures: float64 on demand, without leaking x64 into other tests.

Most of the suite's time is XLA compiling small programs, many of them identical across tests (the same
scene fitted several times, a resumed run). A persistent compilation cache shared by the test workers
compiles each distinct program once per machine.
"""

from pathlib import Path

import jax
import pytest

_CACHE = Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax-compilation"
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats enabled (gradient checks)."""
    with jax.enable_x64(True):
        yield
