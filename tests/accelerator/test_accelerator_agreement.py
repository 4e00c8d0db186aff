"""On an accelerator (TPU, GPU), the package's defaults give the CPU's answers (issue 55).

The suite's machine and CI have no accelerator: these tests are skipped there, with the reason. On a machine
with one (`pytest -n 0 tests/accelerator`, one process: a TPU admits one program at a time) they render a
cloth and roll out the demo cloth on the accelerator and on the host CPU, with nothing set by the caller.

Tolerances: an image value is a coverage-weighted colour in [0, 1]; float32 products done exactly on both
sides leave differences of transcendental functions' last bits (a few 1e-7 relative) blown up at most by the
soft edges' logistic slope (sigma = 1e-4 relative to the pixel: ~1e3), so 1e-3 (issue 55's bound). The demo
cloth's positions after 320 semi-implicit Euler steps of 1/1920 s: each step's rounding (~1e-7 m at 1 m) is
carried by the integration; 1e-5 m is the issue's bound, 100 steps' worth of round-off.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs

ACCELERATOR = jax.default_backend() != "cpu"
pytestmark = pytest.mark.skipif(not ACCELERATOR, reason="no accelerator here (JAX's default backend is the CPU)")


def _on_both(fn, *args):
    """fn(*args) compiled and run on the accelerator and on the host CPU, as numpy arrays."""
    out = []
    for device in (jax.devices()[0], jax.devices("cpu")[0]):
        with jax.default_device(device):
            out.append(np.asarray(gs.jit(fn)(*jax.device_put(args, device))))
    return out


def test_the_render_agrees_with_the_cpu():
    from gradsim_jax.render import FaceColors, Lights

    xs, ys = np.meshgrid(np.linspace(-1, 1, 21), np.linspace(-0.5, 0.5, 11))
    verts = np.stack([xs.ravel(), ys.ravel(), 0.15 * np.sin(3 * xs.ravel())], 1).astype(np.float32)
    faces = []
    for j in range(10):
        for i in range(20):
            a = j * 21 + i
            faces += [[a, a + 1, a + 22], [a, a + 22, a + 21]]
    faces = np.asarray(faces, np.int32)
    cam = gs.look_at_camera(3.0, 25.0, 30.0, width=128, height=128)
    colors = FaceColors(jnp.asarray(np.random.default_rng(0).uniform(0.2, 1.0, (len(faces), 3)), jnp.float32))
    lights = Lights(jnp.asarray(0.5), jnp.asarray(0.5), jnp.asarray([0.3, 1.0, -0.6]))
    acc, cpu = _on_both(lambda v: gs.render(cam, v, jnp.asarray(faces), colors, lights=lights), verts)
    assert np.max(np.abs(acc - cpu)) <= 1e-3


def test_the_demo_cloth_agrees_with_the_cpu():
    from gradsim_jax.scenes import gradsim_demo_cloth

    top, par, st = gradsim_demo_cloth().build(gravity=(0.0, -9.8, 0.0))
    acc, cpu = _on_both(lambda p: gs.simulate(top, p, st, frames=10, substeps=32).particles.x, par)
    assert np.isfinite(acc).all()
    assert np.max(np.abs(acc - cpu)) <= 1e-5


def test_float64_work_runs_on_the_host_where_the_backend_lacks_it():
    from gradsim_jax.compilation import Float64OnHost, native_float64
    from gradsim_jax.diagnostics.precision import at_precision

    if native_float64():
        pytest.skip(f"the {jax.default_backend()} backend has float64")
    with pytest.warns(Float64OnHost) if not _warned() else _nothing():
        with at_precision(64):
            x = jnp.fft.fft(jnp.arange(4.0))  # no float64 FFT on a TPU
    assert x.dtype == jnp.complex128
    np.testing.assert_allclose(np.asarray(x), np.fft.fft(np.arange(4.0)), atol=1e-12)


def _warned() -> bool:
    from gradsim_jax import compilation

    return bool(compilation._WARNED_HOST)


def _nothing():
    import contextlib

    return contextlib.nullcontext()
