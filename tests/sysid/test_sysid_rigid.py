"""The rigid system-identification scenes (`scenes/rigid.py`): recovery from 50 % off on reduced scenes
(mass, friction), another scene with other values and camera, and a resting box that stays put."""

import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.scenes import rigid

# Reduced scenes: 32 px and fewer frames than the demos, so that a fit takes seconds.
SMALL = {"size": 32}


def _scalar(value) -> float:
    return float(np.ravel(np.asarray(value))[0])


def _recover(exp, free, *, seed=0, iterations=25, polish=10, horizon=None, learning_rate=0.05):
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    initial = sysid.perturbed(truth, free, seed=seed, low=0.5, high=0.5)
    config = sysid.FitConfig(free=tuple(free), iterations=iterations, learning_rate=learning_rate, polish=polish,
                             horizon=horizon, progress=False, report=False)
    result = sysid.identify(exp, target, initial, config)
    return {n: sysid.relative_error(n, result.theta[n], truth[n]) for n in free}, initial, truth


def test_demo_scenes_are_stable_with_a_mass_half_the_truth():
    for exp in (rigid.rigid_mass(**SMALL, frames=12), rigid.rigid_material(**SMALL, frames=12)):
        p = exp.params.rigid
        dt = exp.frame_dt / exp.substeps
        limits = rigid.penalty_stability(mass=0.5 * float(p.mass[0]), ke=1.5 * float(p.contact_ke[0]),
                                         kd=1.5 * float(p.contact_kd[0]), kf=1.5 * float(p.contact_kf[0]), dt=dt)
        assert limits["normal"] < 4.0 and limits["friction"] < 2.0, (exp.name, limits)


@pytest.mark.slow  # 21 s cold; CI's 10 minutes: `make test-all` runs it
def test_mass_recovered_on_another_scene_and_camera():
    """Other true mass, push and box, a camera from the other side and higher up, a guess 50 % high."""
    exp = rigid.rigid_mass(**SMALL, frames=14, mass=2.5, half_extents=(0.1, 0.12, 0.2), push=(15.0, 0.0, 5.0),
                           contact_ke=2.0e4, contact_kd=80.0, elevation=45.0, azimuth=-60.0)
    errors, initial, truth = _recover(exp, ["body_mass"], seed=2, iterations=25, polish=10, horizon=6)
    assert _scalar(initial["body_mass"]) > _scalar(truth["body_mass"])
    assert errors["body_mass"] < 1e-3


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_friction_recovered_on_the_material_scene():
    exp = rigid.rigid_material(**SMALL, frames=12, estimate=("body_mu",))
    errors, _, _ = _recover(exp, ["body_mu"], iterations=15, polish=6, horizon=8, learning_rate=0.1)
    assert errors["body_mu"] < 1e-2


@pytest.mark.parametrize("contact", ["penalty", "impulse"])
def test_box_resting_on_the_ground_stays_put(contact):
    """A box placed on the ground in the demo settings (substeps, contact coefficients) does not jitter:
    after settling it keeps its place and orientation to a fraction of a millimetre."""
    if contact == "penalty":
        exp = rigid.rigid_mass(**SMALL, frames=30, push=(0.0, 0.0, 0.0), height=0.0, tilt=0.0)
    else:
        exp = rigid.rigid_restitution(**SMALL, frames=30, height=0.0, velocity=(0.0, 0.0, 0.0),
                                      omega=(0.0, 0.0, 0.0), tilt=0.0)
    x = np.asarray(sysid.vertices(exp, exp.theta), np.float64)
    settled = x[10:]
    assert np.max(np.abs(settled - settled[0])) < 1e-4
    assert np.max(np.abs(x[-1] - x[0])) < 2e-3  # penetration m g / (N ke) is about 0.25 mm
    assert np.min(x[..., 1]) > -2e-3
