"""Per-particle initial velocity (gradSim's cloth demo, Table 3: 0.026 mean relative error): below 0.01."""

import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.scenes.demos import tossed_cloth


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_per_particle_velocity_below_one_percent():
    exp = tossed_cloth(size=32, frames=12, cells=2)
    truth = dict(exp.theta)
    v_true = np.asarray(truth["velocity"])
    assert np.all(np.linalg.norm(v_true, axis=1) > 0.5)
    _, target = sysid.simulate_video(exp, truth)
    initial = sysid.perturbed(truth, ("velocity",), seed=0, low=0.3, high=0.5, free_particles=exp.free_particles)
    start = sysid.relative_error("velocity", initial["velocity"], v_true)
    assert start > 0.25
    theta, records = sysid.levenberg_marquardt(exp, target, initial, ("velocity",), steps=12)
    err = sysid.relative_error("velocity", theta["velocity"], v_true, exp.free_particles)
    assert err < 0.01, f"mean relative error {err:.4f} (from {start:.3f})"
