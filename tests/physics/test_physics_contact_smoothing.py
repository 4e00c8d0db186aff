"""The smooth onset of penalty contact (`Scene.build(contact_smoothing=...)`, `physics.contact.contact_depth`): the
depth and weight laws, the resting height they give, a bounce whose gradient by the drop height stops jumping
(and follows the loss's slope), float64 gradients against central differences, and bad values named."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import SemiImplicitEuler
from gradsim_jax.physics.contact import contact_depth

G = 9.81


def test_depth_and_weight_laws(x64):
    c = jnp.linspace(-0.05, 0.05, 1001)
    depth, weight = contact_depth(c, 0.0)
    np.testing.assert_array_equal(np.asarray(depth), np.minimum(np.asarray(c), 0.0))
    np.testing.assert_array_equal(np.asarray(weight), (np.asarray(c) < 0).astype(float))
    s = 2e-3
    depth, weight = contact_depth(c, s)
    cn = np.asarray(c)
    exact = -s * np.log1p(np.exp(-cn / s))
    np.testing.assert_allclose(np.asarray(depth), exact, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(np.asarray(weight), 1.0 / (1.0 + np.exp(cn / s)), rtol=1e-12, atol=1e-300)
    # Deep inside the smooth depth is the penetration (to s e^(-|c|/s)); far outside it vanishes; the derivative
    # of the depth is the weight.
    inside, outside = cn < -10 * s, cn > 10 * s
    assert np.all(np.abs(np.asarray(depth)[inside] - cn[inside]) <= s * np.exp(-10.0))
    assert np.all(np.abs(np.asarray(depth)[outside]) <= s * np.exp(-10.0))
    slope = jax.vmap(jax.grad(lambda x: contact_depth(x, s)[0]))(c)
    np.testing.assert_allclose(np.asarray(slope), np.asarray(weight), rtol=1e-12, atol=1e-300)


def _drop(smoothing, ke=1e3, kd=0.5):
    return gs.particles(np.array([[0.0, 0.3, 0.0]]), mass=0.1).build(
        ground=True, contact_ke=ke, contact_kd=kd, contact_kf=0.0, contact_mu=0.0, contact_smoothing=smoothing,
        dtype=jnp.float64)


def test_a_particle_rests_where_the_smooth_spring_carries_its_weight(x64):
    """At rest ke s softplus(-c / s) = m g: c = -s log(e^(m g / (ke s)) - 1), above the surface for a light load
    (m g < ke s ln 2), at the penalty's -m g / ke for a heavy one."""
    for s, ke in ((3e-3, 1e3), (1e-4, 1e3)):
        topology, params, state = _drop(s, ke=ke, kd=20.0)
        traj = gs.simulate(topology, params, state, frames=240, substeps=16, frame_dt=1.0 / 60.0)
        c = float(traj.particles.x[-1, 0, 1]) - 0.01  # less the particle radius
        load = 0.1 * G / (ke * s)
        np.testing.assert_allclose(c, -s * np.log(np.expm1(load)), rtol=1e-6, atol=1e-9)
    assert -s * np.log(np.expm1(load)) == pytest.approx(-0.1 * G / ke, rel=1e-3)  # heavy: the exact penalty's


def _height_gradients(smoothing, heights):
    topology, params, state = _drop(smoothing)

    def loss(h):
        x = state.particles.x.at[0, 1].set(h)
        s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, x=x))
        traj = gs.simulate(topology, params, s, frames=30, substeps=8, frame_dt=1.0 / 60.0,
                           integrator=SemiImplicitEuler(implicit_contact=False))
        return traj.particles.x[-1, 0, 1]

    value, grad = jax.jit(jax.vmap(jax.value_and_grad(loss)))(jnp.asarray(heights))
    return np.asarray(value), np.asarray(grad), jax.jit(loss)


def test_a_smooth_onset_makes_a_bounce_gradient_follow_the_loss(x64):
    """A particle dropped from 101 heights in [0.20, 0.21] m onto ke 1e3 N/m, its height after 0.5 s (it bounced):
    with the exact penalty d loss / d h jumps between heights 0.1 mm apart (the step of first contact changes, and
    the damping switches on at once: the loss jumps too) and its mean is far from the loss's slope; with a 3 mm
    onset it is continuous and its mean is the slope (benchmarks/bench_contact_smoothing.py: 401 heights)."""
    heights = np.linspace(0.20, 0.21, 101)
    value, grad, _ = _height_gradients(0.0, heights)
    slope = (value[-1] - value[0]) / (heights[-1] - heights[0])
    assert np.abs(np.diff(grad)).max() > 1.0
    assert abs(grad.mean() - slope) > 0.5 * abs(slope)
    value, grad, loss = _height_gradients(3e-3, heights)
    slope = (value[-1] - value[0]) / (heights[-1] - heights[0])
    # Left: the kink of the damping's min(vn, 0) where a step's velocity turns (2e-2 measured) and the smooth
    # curve's change over 0.1 mm.
    assert np.abs(np.diff(grad)).max() < 0.1
    assert grad.mean() == pytest.approx(slope, rel=2e-2)
    h = 1e-6
    for k in (0, 37, 100):
        fd = (loss(heights[k] + h) - loss(heights[k] - h)) / (2 * h)
        assert grad[k] == pytest.approx(float(fd), rel=1e-6)


def test_bad_smoothing_is_named():
    p = gs.particles(np.zeros((1, 3)))
    for bad in (-1e-3, float("nan"), "soft"):
        with pytest.raises(ValueError, match="contact_smoothing"):
            p.build(contact_smoothing=bad)
