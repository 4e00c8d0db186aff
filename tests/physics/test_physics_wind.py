"""The wind (`physics.wind`): a face's push p (w . n) A n against its closed form (direction, the normal's sign,
area scaling), the keyed strength against Blender's own curve, the integrator adding it at the step's time, and
gradients against float64 finite differences."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry.cloth import cloth_grid
from gradsim_jax.physics import (
    blender_pressure, euler_step, face_wind_forces, simulate, wind_factor, wind_params, with_wind,
)

WIND_CASE = Path(__file__).resolve().parents[1] / "data" / "blender" / "wind" / "case.json"


def closed_form(x, direction, pressure):
    """float64: p (w . n) A n / 3 on each corner of the one triangle x [3, 3]."""
    x = np.asarray(x, np.float64)
    c = np.cross(x[1] - x[0], x[2] - x[0])
    area, n = np.linalg.norm(c) / 2.0, c / np.linalg.norm(c)
    w = np.asarray(direction, np.float64) / np.linalg.norm(direction)
    return np.tile(pressure * (w @ n) * area * n / 3.0, (3, 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_triangle_against_its_closed_form(seed):
    rng = np.random.default_rng(seed)
    x, w, p = rng.normal(size=(3, 3)), rng.normal(size=3), 7.5
    tri = jnp.array([[0, 1, 2]])
    f = np.asarray(face_wind_forces(jnp.asarray(x, jnp.float32), tri, jnp.asarray(w, jnp.float32), p))
    # float32 of O(1) products: a few ulps of the force's size.
    np.testing.assert_allclose(f, closed_form(x, w, p), atol=1e-5 * np.abs(closed_form(x, w, p)).max() + 1e-7)
    # The other winding flips n twice: the same push.
    g = np.asarray(face_wind_forces(jnp.asarray(x, jnp.float32), tri[:, ::-1], jnp.asarray(w, jnp.float32), p))
    np.testing.assert_allclose(g, f, rtol=1e-5, atol=1e-7)
    # Twice the size: four times the area, four times the push; along the normal only.
    h = np.asarray(face_wind_forces(jnp.asarray(2 * x, jnp.float32), tri, jnp.asarray(w, jnp.float32), p))
    np.testing.assert_allclose(h, 4 * f, rtol=1e-5, atol=1e-6)
    n = np.cross(x[1] - x[0], x[2] - x[0])
    assert np.linalg.norm(np.cross(f[0], n)) <= 1e-5 * np.linalg.norm(f[0]) * np.linalg.norm(n) + 1e-9


def test_a_face_square_to_the_wind_and_one_edge_on():
    x = jnp.array([[0.0, 0, 0], [2, 0, 0], [0, 1, 0]])  # area 1, normal +z
    tri = jnp.array([[0, 1, 2]])
    np.testing.assert_allclose(face_wind_forces(x, tri, jnp.array([0.0, 0, -3]), 6.0), [[0, 0, -2]] * 3)
    np.testing.assert_allclose(face_wind_forces(x, tri, jnp.array([1.0, 1, 0]), 6.0), np.zeros((3, 3)), atol=1e-7)
    # Shared vertices sum their faces' thirds: a flat grid feels p A in all, along its normal.
    scene = cloth_grid(3, 2, 0.1, 0.2)
    topology, params, state = scene.build()
    f = face_wind_forces(state.particles.x, topology.cloth.triangles, jnp.array([0.0, 0, 1]), 10.0)
    normal = np.cross(*np.asarray(state.particles.x)[[1, 4]] - np.asarray(state.particles.x)[0])
    total = np.asarray(f).sum(0)
    np.testing.assert_allclose(np.abs(total), 10.0 * 0.3 * 0.4 * np.abs(normal) / np.linalg.norm(normal),
                               rtol=1e-5, atol=1e-6)


def test_keyed_strength_follows_blenders_curve():
    """case.json's strength per frame is Blender's own Bezier keyframes (0 at frame 1, 1500 at 10, held)."""
    case = json.loads(WIND_CASE.read_text())["wind"]
    per_frame = np.asarray(case["strength_per_frame"]) / 1500.0
    wind = wind_params([0, 1, 0], 1.0, [0.0, 0.3], [0.0, 1.0])
    ours = np.array([float(wind_factor(wind, k / 30.0)) for k in range(len(per_frame))])
    np.testing.assert_allclose(ours, per_frame, atol=2e-6)  # float32 of a cubic in [0, 1]
    linear = wind_params([0, 1, 0], 1.0, [0.0, 0.3], [0.0, 1.0], ease="linear")
    assert float(wind_factor(linear, 0.1)) == pytest.approx(1.0 / 3.0, abs=1e-6)
    assert float(wind_factor(wind, -1.0)) == 0.0 and float(wind_factor(wind, 9.0)) == 1.0  # held outside
    three = wind_params([0, 1, 0], 1.0, [0.0, 1.0, 2.0], [0.0, 2.0, 1.0])
    assert float(wind_factor(three, 1.5)) == pytest.approx(1.5, abs=1e-6)  # halfway down the second segment
    assert float(wind_factor(wind_params([1, 0, 0], 2.0), 5.0)) == 1.0
    assert blender_pressure(1500.0, 30.0) == pytest.approx(900.0)


@pytest.mark.parametrize("bad, match", [
    (dict(direction=[0, 0, 0]), "direction"), (dict(strength=-1.0), "strength"),
    (dict(key_times=[0.0, 0.0], key_factors=[0, 1]), "increasing"),
    (dict(key_times=[0.0, 1.0], key_factors=[1.0]), "one factor per key"), (dict(ease="cubic"), "ease")])
def test_bad_wind_is_refused(bad, match):
    args = dict(direction=[0, 1, 0], strength=1.0, key_times=(), key_factors=())
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        wind_params(**args)


def windy_cloth(strength=50.0, keys=((0.0, 0.1), (0.0, 1.0)), dtype=None):
    """A 2 x 2 cloth (0.2 m square, normal +z) without gravity, in a wind along +z."""
    scene = cloth_grid(2, 2, 0.1, 0.1, mass=0.01, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0, bend_ke=0.0, bend_kd=0.0)
    topology, params, state = scene.build(gravity=(0.0, 0.0, 0.0), dtype=dtype)
    wind = wind_params([0.0, 0.0, 1.0], strength, keys[0], keys[1], dtype=params.particles.mass.dtype)
    topology, params = with_wind(topology, params, wind)
    return topology, params, state


def test_the_integrator_adds_it_at_the_steps_time():
    topology, params, state = windy_cloth()
    before = euler_step(topology, params, state, None, 1e-3, t=0.0)  # factor 0 at t = 0
    np.testing.assert_allclose(before.particles.v, 0.0, atol=1e-9)
    after = euler_step(topology, params, state, None, 1e-3, t=0.5)  # factor 1: v = dt f / m
    f = face_wind_forces(state.particles.x, topology.cloth.triangles, params.wind.direction, 50.0)
    np.testing.assert_allclose(after.particles.v, 1e-3 * np.asarray(f) / 0.01, rtol=1e-5, atol=1e-7)
    assert float(np.asarray(f)[:, 2].sum()) == pytest.approx(50.0 * 0.04, rel=1e-5)
    with pytest.raises(ValueError, match="no cloth triangles"):
        from gradsim_jax.geometry import particles
        t0, p0, _ = particles(np.zeros((2, 3))).build()
        with_wind(t0, p0, params.wind)


def test_gradients_against_float64_finite_differences(x64):
    """d(final height)/d(strength, direction) of a short rollout through the ramp, float64."""
    topology, params, state = windy_cloth(keys=((0.0, 0.05), (0.2, 1.0)), dtype=jnp.float64)

    def height(strength, direction):
        wind = params.wind.__class__(direction=direction, strength=strength, key_times=params.wind.key_times,
                                     key_factors=params.wind.key_factors, ease=params.wind.ease)
        p = params.__class__(**{**params.__dict__, "wind": wind})
        traj = simulate(topology, p, state, frames=4, substeps=5, frame_dt=0.025)
        return jnp.sum(traj.particles.x[-1, :, 2] * jnp.arange(1.0, 10.0))

    s0, d0 = jnp.asarray(50.0), jnp.asarray([0.3, 0.0, 1.0])
    g_s, g_d = jax.grad(height, argnums=(0, 1))(s0, d0)
    h = 1e-4
    fd_s = (height(s0 + h, d0) - height(s0 - h, d0)) / (2 * h)
    assert float(g_s) == pytest.approx(float(fd_s), rel=1e-7)
    for k in range(3):
        e = jnp.zeros(3).at[k].set(h)
        fd = (height(s0, d0 + e) - height(s0, d0 - e)) / (2 * h)
        assert float(g_d[k]) == pytest.approx(float(fd), rel=1e-6, abs=1e-10)
    assert float(g_s) > 0  # more wind along +z lifts it
