"""The horizon diagnostic marks the chaotic horizon of a double pendulum made of particles and stiff springs
within a factor of two of the horizon its Lyapunov exponent predicts."""

import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.diagnostics.horizon import (
    EPS32, gradient_horizon, lyapunov_exponent, predicted_horizon,
)
from gradsim_jax.physics import replace_paths

ARM, FPS, SUBSTEPS, FRAMES = 0.125, 60.0, 16, 300  # m, frames/s: 5 s of motion, dt = 1/960 s


def double_pendulum():
    """Pivot (pinned) and two 1 kg bobs on rods of 0.125 m (springs of 2e4 N/m, 0.1 % stretch under the bobs'
    weight), released from rest with both arms horizontal: a chaotic motion."""
    x = np.array([[0.0, 0.0, 0.0], [ARM, 0.0, 0.0], [2 * ARM, 0.0, 0.0]])
    scene = gs.particles(x, mass=[0.0, 1.0, 1.0]).add_springs([[0, 1], [1, 2]], ke=2e4, kd=0.0)
    return scene.build()


def test_marked_horizon_agrees_with_the_lyapunov_prediction():
    topology, params, state0 = double_pendulum()
    tree = {"v": state0.particles.v, "params": params, "state": state0}

    def heights(p):
        """[FRAMES] height of the outer bob at each frame: the loss of horizon k is its height at frame k."""
        s0 = replace_paths(p["state"], {"particles.v": p["v"]})
        traj = gs.simulate(topology, p["params"], s0, frames=FRAMES, substeps=SUBSTEPS, frame_dt=1 / FPS)
        return traj.particles.x[1:, 2, 1]

    times = np.arange(1, FRAMES + 1) / FPS
    result = gradient_horizon(heights, tree, free=("v",), times=times, mode="forward")

    # Independently: Benettin's largest Lyapunov exponent of the same simulation in float64, over 10 s.
    def advance(state):
        traj = gs.simulate(topology, params, state, frames=1, substeps=SUBSTEPS, frame_dt=1 / FPS)
        return replace_paths(state, {"particles.x": traj.particles.x[-1], "particles.v": traj.particles.v[-1]})

    lam = lyapunov_exponent(advance, state0, steps=2 * FRAMES, dt=1 / FPS)
    expected = predicted_horizon(lam, result.tol)  # ln(0.1 / 2^-24) / lambda
    assert 1.0 < lam < 10.0
    assert result.horizon is not None, result.table()
    assert 0.5 < result.horizon / expected < 2.0, (result.horizon, expected, lam)
    # Early on the two precisions agree to many digits; the difference grows by orders of magnitude.
    assert np.all(result.relative_difference[:30] < 1e-3)
    assert result.growth_rate > 0 and np.isfinite(result.norm64).all()
    assert expected == pytest.approx(np.log(0.1 / EPS32) / lam)


def test_smooth_motion_stays_informative_and_outputs_are_written(tmp_path):
    # x(t) = v t: the gradient of x at horizon t w.r.t. v is t, exactly, in both precisions.
    def positions(p):
        return p["v"] * jnp.arange(1, 11, dtype=p["v"].dtype) * 0.1

    result = gradient_horizon(positions, {"v": jnp.asarray(2.0)}, times=np.arange(1, 11) * 0.1)
    assert result.horizon is None
    np.testing.assert_allclose(result.norm64, np.arange(1, 11) * 0.1, rtol=1e-12)
    assert np.all(result.relative_difference < 1e-6)
    result.plot(tmp_path / "h.png")
    result.write_json(tmp_path / "h.json")
    assert (tmp_path / "h.png").stat().st_size > 1000 and "criterion" in (tmp_path / "h.json").read_text()
    assert "none within the horizons tried" in result.table()


@pytest.mark.parametrize("kwargs, match", [({"mode": "sideways"}, "mode"), ({"tol": -1.0}, "tol"),
                                           ({"times": [1.0, 0.5]}, "times")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gradient_horizon(lambda p: p["v"] * jnp.arange(2.0), {"v": jnp.asarray(1.0)}, **kwargs)
