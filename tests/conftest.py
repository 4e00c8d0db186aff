"""Shared fixtures: float64 on demand, without leaking x64 into other tests.

Most of the suite's time is XLA compiling small programs, many of them identical across tests (the same
scene fitted several times, a resumed run). A persistent compilation cache shared by the test workers
compiles each distinct program once per machine. The suite compiles with the library's own options: it used
to turn XLA's fusion emitters off for `gs.jit` programs (a fit's step compiled about 30 % faster), until that
was found to compute a textured render's gradient wrong (`compilation.WRONG_GRADIENT_OPTIONS`): a suite must
run what users run. (Tried and dropped: LLVM's expensive passes off, `xla_llvm_disable_expensive_passes`: the
render and smoke tests took 90 s instead of 102 s from a cold cache, but the whole suite 16.3 min instead of
14.9 min on the same machine, its 39 slowest tests a median 12 % slower, some up to 65 %.) (Tried and dropped:
LLVM at -O0 via `XLA_FLAGS`: two compile-bound test files went from 101 to 88 s from a cold cache, but a
render-bound fit from 30 to 96 s.) (Tried and dropped: the fusion emitters off for every program through
`XLA_FLAGS`, 2026-12-07: the stencil and substeps tests 114 s cold against 122 s, but three tests failed: a
textured render's gradient against finite differences 20.09 against 26.98, DIB-R's silhouette gradient in
tests/sysid/test_sysid_shape.py off by 9e-4, and the pendulum's exact energy check between a compiled and an
eager computation.) (Tried and dropped: caching every compiled program, minimum compile time 0 s instead of
0.2 s: 128 s against 122 s.)
"""

from pathlib import Path

import jax  # noqa: E402
import pytest  # noqa: E402

_CACHE = Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax-compilation"
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats enabled (gradient checks)."""
    with jax.enable_x64(True):
        yield


#: Folders of tests/ in the order the suite runs them: the end-to-end ones (a fit or a demo each, tens of
#: seconds) first, so that the two workers of `make test` end on short tests instead of one of them running
#: a long fit alone at the end (xdist's worksteal hands out the collected order in chunks).
_ORDER = ("cli", "sysid", "docs", "control", "diagnostics", "fit", "physics", "render", "property", "geometry")


def pytest_collection_modifyitems(config, items):
    def rank(item):
        parts = Path(str(item.fspath)).parts
        folder = parts[parts.index("tests") + 1] if "tests" in parts else ""
        return _ORDER.index(folder) if folder in _ORDER else len(_ORDER)

    items.sort(key=rank)  # stable: the order within a folder stays
