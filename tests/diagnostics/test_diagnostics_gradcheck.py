"""gradcheck: agrees with finite differences on a small spring scene; flags a wrong custom gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.diagnostics import gradcheck
from gradsim_jax.physics import replace_paths


def chain():
    """Three particles in a horizontal spring chain, the first pinned: a damped swinging chain."""
    x = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.6, 0.05, 0.0]])
    scene = gs.particles(x, mass=[0.0, 0.2, 0.1]).add_springs([[0, 1], [1, 2]], ke=50.0, kd=0.1)
    topology, params, state0 = scene.build()
    return topology, {"mass": params.particles.mass, "ke": params.springs.ke, "v": state0.particles.v,
                      "model": {"params": params, "state": state0}}


def make_loss(topology, squash=lambda x: x * x):
    def loss(p):
        params = replace_paths(p["model"]["params"], {"particles.mass": p["mass"], "springs.ke": p["ke"]})
        state0 = replace_paths(p["model"]["state"], {"particles.v": p["v"]})
        traj = gs.simulate(topology, params, state0, frames=8, substeps=4, frame_dt=1 / 30)
        return jnp.mean(squash(traj.particles.x[-1]))

    return loss


def test_agrees_with_finite_differences_and_forward_mode_on_a_spring_chain():
    topology, params = chain()
    params["v"] = params["v"].at[2].set(jnp.array([0.0, 0.4, 0.1]))
    result = gradcheck(make_loss(topology), params, free=("mass", "ke", "v"))
    assert result.ok, result.table()
    for c in result.checks:
        assert c.ad_error < 1e-9 and c.fd_error < 1e-6 and c.f32_error < 1e-3, c
        assert c.forward is not None and abs(c.reverse) > 0
    assert [c.size for c in result.checks] == [3, 2, 9]
    assert "verdict" in result.table() and result.as_dict()["ok"] is True


@jax.custom_vjp
def wrong_square(x):
    return x * x


# Deliberately wrong backward: d(x^2)/dx is 2x, this returns 3x.
wrong_square.defvjp(lambda x: (x * x, x), lambda x, g: (3.0 * x * g,))


@jax.custom_vjp
def right_square(x):
    return x * x


right_square.defvjp(lambda x: (x * x, x), lambda x, g: (2.0 * x * g,))


def test_flags_a_wrong_custom_gradient_and_passes_a_right_one():
    topology, params = chain()
    bad = gradcheck(make_loss(topology, wrong_square), params, free=("mass", "ke"), float32=False)
    assert not bad.ok
    for c in bad.checks:
        assert c.verdict.startswith("FAIL") and "reverse vs FD" in c.verdict, c
        assert c.forward is None and "custom_vjp" in c.note  # no forward rule: reverse vs FD decides
        assert c.fd_error > 0.1
    good = gradcheck(make_loss(topology, right_square), params, free=("mass", "ke"), float32=False)
    assert good.ok, good.table()


def test_float32_disagreement_fails_the_verdict():
    # sin(1e4 x) at x = 1.1: float32 holds x to 7e-8 relative, so the phase 1e4 x is off by ~1e-3 rad, and the
    # derivative 1e4 cos(1e4 x) by ~1e-3 relative: beyond the tolerance 1e-5 asked for. The default FD step
    # (6e-6 relative) is too coarse for a loss that varies on a scale of 1e-4: a smaller one is given.
    result = gradcheck(lambda p: jnp.sin(1e4 * p["x"]), {"x": jnp.asarray(1.1)}, f32_rtol=1e-5,
                       steps={"x": 1e-8})
    (c,) = result.checks
    assert c.fd_error < 1e-4 and c.ad_error < 1e-9
    assert c.verdict == "FAIL: float32 vs float64" and c.f32_error > 1e-5


@pytest.mark.parametrize("kwargs, match", [
    ({"free": ("nope",)}, "free must name"),
    ({"fd_rtol": 0.0}, "fd_rtol"),
    ({"steps": {"x": -1.0}}, "steps"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gradcheck(lambda p: jnp.sum(p["x"] ** 2), {"x": jnp.ones(2)}, **kwargs)


def test_non_scalar_loss_is_refused():
    with pytest.raises(ValueError, match="scalar"):
        gradcheck(lambda p: p["x"] ** 2, {"x": jnp.ones(2)})
