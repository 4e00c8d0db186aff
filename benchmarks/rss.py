"""Peak resident memory of a benchmark process (Linux): read it, and reset its high-water mark after
compiling so that what follows measures the run alone. Numpy-free, gradsim-free: the Warp side of
`bench_warp.py` imports it from its own interpreter."""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's RSS high-water mark (VmHWM) in MB; ru_maxrss where /proc has none."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss(*, collect: bool = False, drop_jax_caches: bool = False) -> bool:
    """Hand freed heap back to the OS and reset this process's RSS high-water mark (Linux, glibc); True if
    it worked. `collect`: run a garbage collection first. `drop_jax_caches`: first drop JAX's tracing and
    compilation caches (`jax.clear_caches()`: the jaxprs and executables of the scene's set-up and of tracing
    the benchmarked function, which its compiled program, held by the caller, no longer needs)."""
    import gc

    if drop_jax_caches:
        import jax

        jax.clear_caches()
    if collect or drop_jax_caches:
        gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)  # the compiler's freed memory, kept by malloc otherwise
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except (OSError, AttributeError):
        return False
