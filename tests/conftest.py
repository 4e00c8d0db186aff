"""Shared fixtures: float64 on demand, without leaking x64 into other tests.

Most of the suite's time is XLA compiling small programs, many of them identical across tests (the same
scene fitted several times, a resumed run). A persistent compilation cache shared by the test workers
compiles each distinct program once per machine. And the suite compiles with XLA's fusion emitters off
(`gradsim_jax.compilation`): a fit's step compiles about 30 % faster and runs 10-25 % slower, and the suite
is mostly compiling. `GRADSIM_JAX_COMPILER_OPTIONS=` (empty) runs it with the library's defaults. (Tried and
dropped: LLVM's expensive passes off as well, `xla_llvm_disable_expensive_passes`: the render and smoke tests
took 90 s instead of 102 s from a cold cache, but the whole suite 16.3 min instead of 14.9 min on the same
machine, its 39 slowest tests a median 12 % slower, some up to 65 %.) (Tried
and dropped: LLVM at -O0 via `XLA_FLAGS`: two compile-bound test files went from 101 to 88 s from a cold
cache, but a render-bound fit from 30 to 96 s.) (Tried and dropped: the fusion emitters off for every program,
`--xla_cpu_use_fusion_emitters=false` in XLA_FLAGS, which reaches the tests' own `jax.jit`s and JAX's eager
ops too: the stencil and substeps tests took 114 s from a cold cache against 122 s without it, but two rasterizer
gradients came out wrong (the texture's vertex gradient of test_render_rasterize.py, 40.07 against 39.43 in
norm, and the DIB-R silhouette's of test_sysid_shape.py by 9e-4), so XLA miscompiles there without them.)
"""

import os
from pathlib import Path

# Before gradsim_jax is imported (it reads the variable once); the CLI tests' subprocesses inherit it.
os.environ.setdefault("GRADSIM_JAX_COMPILER_OPTIONS", '{"xla_cpu_use_fusion_emitters": false}')

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
