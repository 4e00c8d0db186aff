"""Big scenes: index arrays are arguments of the compiled programs (never constants folded into them),
and the memory and time a run will take are estimated, and checked, before anything compiles."""

import collections
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax import cli, sysid
from gradsim_jax.physics import estimate_cost, gather
from gradsim_jax.scenefile import load_scene
from gradsim_jax.sysid import experiment as sysid_experiment


def _scene_file(tmp_path, grid, *, extra="", frames=2):
    path = Path(tmp_path) / "scene.toml"
    path.write_text(f"""
[scene]
grid = [{grid}, {grid}]
cell = [{1.0 / grid}, {1.0 / grid}]
pos = [-0.5, 0.0, -0.5]
rot = [0.7071068, 0.7071068, 0.0, 0.0]
fix = ["left"]
{extra}
[render]
width = 16
height = 16
tile_capacity = 16
pixel_capacity = 8
[simulation]
frames = {frames}
substeps = 2
[fit]
free = ["mass"]
""")
    return path


class _Lowered(Exception):
    """Raised instead of compiling: the constants check runs when a program is lowered."""


@pytest.fixture
def lower_only(monkeypatch):
    """`jax.jit` that lowers the program (where JAX counts its captured constants) and stops there; its
    `lower` is the real one (the rest-shape helpers are compiled ahead of time: `physics.gather`)."""
    real_jit = jax.jit

    def jit(fun, **options):
        jitted = real_jit(fun, **options)

        def call(*args, **kwargs):
            jitted.lower(*args, **kwargs)
            raise _Lowered

        call.lower = jitted.lower
        return call

    monkeypatch.setattr(jax, "jit", jit)
    # sysid and the helpers keep their jitted functions for the process: lower-only ones must not outlive the test.
    monkeypatch.setattr(sysid_experiment, "_COMPILED", collections.OrderedDict())
    gather._compiled.cache_clear()


def test_cli_programs_capture_no_scene_arrays_as_constants(tmp_path, lower_only):
    # A 40 x 40 grid: its triangles, colours and per-triangle parameters alone are > 100 KB. Captured by a
    # closure they become constants of the program, which XLA folds (minutes and gigabytes for 2000 x 2000).
    exp = load_scene(_scene_file(tmp_path, 40)).experiment()
    target = np.zeros((exp.frames + 1, 16, 16, 4), np.float32)
    theta = sysid.as_theta(exp, {})
    config = dict(free=("mass",), progress=False)
    programs = {  # what `render` and `fit` compile: the video, Adam's step, Levenberg-Marquardt, the report
        "video": lambda: sysid.simulate_video(exp, {}),
        "fit step": lambda: sysid.identify(exp, target, theta, sysid.FitConfig(iterations=1, polish=0, report=False,
                                                                               **config)),
        "levenberg-marquardt": lambda: sysid.levenberg_marquardt(exp, target, theta, ("mass",), steps=1),
        "report": lambda: sysid.identify(exp, target, theta, sysid.FitConfig(iterations=0, polish=0, **config)),
    }
    previous = jax.config.jax_captured_constants_warn_bytes
    jax.config.update("jax_captured_constants_warn_bytes", 16_000)  # the 16 x 16 image's pixel grid is 2 KB
    try:
        for name, program in programs.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with pytest.raises(_Lowered):
                    program()
            captured = [str(w.message) for w in caught if "constants were captured" in str(w.message)]
            assert not captured, (name, captured)
    finally:
        jax.config.update("jax_captured_constants_warn_bytes", previous)


def test_estimate_is_within_a_factor_two_of_xla(x64):
    del x64  # float64: the estimate scales with the item size
    top, par, st = gs.cloth_grid(40, 40, 0.025, 0.025, fix_left=True).build(dtype=jnp.float64)
    grad = jax.jit(jax.grad(lambda p: jnp.sum(gs.simulate(top, p, st, frames=2, substeps=4).particles.x[-1])))
    m = grad.lower(par).compile().memory_analysis()
    measured = m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes
    est = estimate_cost(top, 2, 4, gradient=True, itemsize=8)
    fixed = 64 * 2**20  # the estimate's allowance for the runtime
    assert 0.5 < (est.memory_bytes - fixed) / measured < 2.0


def test_estimate_scales_with_the_scene():
    small = gs.geometry.cloth_grid_counts(100, 100, bending=False)
    big = gs.geometry.cloth_grid_counts(2000, 2000, bending=False)
    assert big["triangles"] == 8_000_000 and big["particles"] == 2001 ** 2
    a = estimate_cost(small, 30, 16, render_size=(64, 64))
    b = estimate_cost(big, 30, 16, render_size=(64, 64))
    assert 300 < b.memory_bytes / (a.memory_bytes - 64 * 2**20) < 500 and b.seconds > 300 * a.seconds
    fit = estimate_cost(small, 30, 16, render_size=(64, 64), gradient=True, iterations=100)
    assert fit.memory_bytes > a.memory_bytes and fit.seconds > 100 * a.seconds
    assert estimate_cost(small, 30, 16, gradient=True, checkpoint=False).memory_bytes > \
        estimate_cost(small, 30, 16, gradient=True).memory_bytes
    capped = estimate_cost(big, 30, 16, render_size=(64, 64), tile_capacity=64, pixel_capacity=16)
    assert capped.seconds < b.seconds / 10
    assert "8000000 triangles" in b.text and "GB" in b.text


def test_cli_refuses_a_run_bigger_than_the_memory(tmp_path, monkeypatch, capsys):
    flat_on_ground = "ground = true\nground_height = 0.0"
    scene = _scene_file(tmp_path, 2, extra=flat_on_ground)
    monkeypatch.setattr(gs.physics, "available_memory_bytes", lambda: 1000)
    out = tmp_path / "video.gif"
    assert cli.main(["render", str(scene), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "more than the 1000 B available" in captured.err and "--force" in captured.err
    assert "WARNING: the initial state starts in deep ground contact" in captured.out
    assert not out.exists()
    assert cli.main(["render", str(scene), "--out", str(out), "--force"]) == 0
    assert out.exists()


def test_scene_file_particle_radius_sets_the_resting_height(tmp_path, capsys):
    scene = _scene_file(tmp_path, 2, extra="ground = true\nground_height = 0.0\nparticle_radius = 0.0")
    exp = load_scene(scene).experiment()
    assert float(exp.params.particles.radius) == 0.0
    report = gs.physics.contact_report(exp.topology, exp.params, exp.state0)
    assert not report.deep
    np.testing.assert_allclose(float(load_scene(_scene_file(tmp_path, 2)).experiment().params.particles.radius), 0.01)


def test_the_implicit_step_and_a_cloth_without_membrane_are_counted():
    import gradsim_jax as gs
    from gradsim_jax.geometry import mesh_edges
    from gradsim_jax.physics import ImplicitEuler, SemiImplicitEuler, estimate_cost

    cloth = gs.cloth_grid(8, 8, 0.05, 0.05, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0)
    springs = cloth.add_springs(mesh_edges(cloth.triangles), 1e5, 1.0)
    off, on = springs.build()[0], springs.build(membrane=True)[0]

    def sim_seconds(topology, integrator):
        return estimate_cost(topology, 10, 5, gradient=True, step_cost=integrator.step_cost()).seconds

    # an implicit substep of 40 CG iterations: 43 explicit ones in a gradient (Integrator.step_cost)
    ratio = sim_seconds(off, ImplicitEuler(iterations=40)) / sim_seconds(off, SemiImplicitEuler())
    assert abs(ratio - 43.0) < 1e-9 * 43.0  # no rendering asked: the simulation is the whole estimate
    # triangles that are only drawn cost no simulation time; with the membrane on they do
    assert sim_seconds(off, SemiImplicitEuler()) < sim_seconds(on, SemiImplicitEuler())
