"""Ground contact: particles rest at ground_height + particle_radius, and an initial state that starts deep
inside that band (which the penalty force would release as a launch) is reported before it runs."""

import warnings

import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import ContactWarning, contact_report

FLAT = gs.quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2)  # the cloth in the x-z plane


def _flat_cloth(y, *, radius=0.01, **build):
    scene = gs.cloth_grid(3, 3, 0.1, 0.1, rot=FLAT, pos=(0.0, y, 0.0), mass=0.01, tri_kd=1.0)
    return scene.build(ground=True, ground_height=0.25, particle_radius=radius,
                       **{"contact_ke": 1.0e3, "contact_kd": 10.0, **build})


def test_cloth_at_ground_height_plus_radius_stays_put():
    top, par, st = _flat_cloth(0.25 + 0.01)
    assert not contact_report(top, par, st).deep
    with warnings.catch_warnings():
        warnings.simplefilter("error", ContactWarning)
        traj = gs.simulate(top, par, st, frames=30, substeps=16)
    # It sags by its weight over the contact stiffness (m g / ke = 0.1 mm), and no more.
    assert np.abs(np.asarray(traj.particles.v)).max() < 0.02
    assert abs(float(traj.particles.x[-1, :, 1].mean()) - 0.26) < 5e-4


def test_cloth_at_ground_height_is_reported_and_warned():
    top, par, st = _flat_cloth(0.25)
    report = contact_report(top, par, st)
    assert report.deep and report.particles_in_contact == 16
    assert report.depth == pytest.approx(0.01, rel=1e-4)
    # The penalty spring stores ke c^2 / 2: released, it moves the particle at c sqrt(ke / m) = 3.2 m/s.
    assert report.release_speed == pytest.approx(0.01 * np.sqrt(1.0e3 / 0.01), rel=1e-3)
    assert "particle_radius" in report.message and "3.2 m/s" in report.message
    with pytest.warns(ContactWarning, match=r"deep ground contact.*ground_height \+ particle_radius"):
        traj = gs.simulate(top, par, st, frames=10, substeps=16)
    assert float(np.asarray(traj.particles.v)[..., 1].max()) > 2.0  # what the warning is about: it is launched


def test_particle_radius_sets_the_resting_height():
    # With radius 0 the same cloth lying on the plane is at rest.
    top, par, st = _flat_cloth(0.25, radius=0.0)
    assert not contact_report(top, par, st).deep
    traj = gs.simulate(top, par, st, frames=10, substeps=16)
    assert np.abs(np.asarray(traj.particles.v)).max() < 0.02


def test_pinned_particles_and_no_ground_are_not_reported():
    top, par, st = _flat_cloth(0.25)
    scene = gs.cloth_grid(3, 3, 0.1, 0.1, rot=FLAT, pos=(0.0, 0.25, 0.0), fix_left=True, fix_right=True,
                          fix_top=True, fix_bottom=True)
    top2, par2, st2 = scene.build(ground=True, ground_height=0.25)
    report = contact_report(top2, par2, st2)
    assert report.particles_in_contact == 4 and report.deep  # the 4 free inner particles
    top3, par3, st3 = scene.build(ground=False, ground_height=0.25)
    assert contact_report(top3, par3, st3).particles_in_contact == 0


def test_unstable_contact_time_step_is_reported():
    # Scene.build's default contact (ke 1e4, kd 100) on 10 g particles: taken explicitly (Warp's), it needs a
    # step below 2e-4 s; with the damping taken backward (the default integrator), below 2 sqrt(m / ke) = 2 ms.
    top, par, st = _flat_cloth(0.26, contact_ke=1.0e4, contact_kd=100.0)
    report = contact_report(top, par, st, dt=1.0 / 60.0 / 16, implicit=False)
    assert not report.deep and not report.stable
    # Semi-implicit Euler on m x'' = -ke x - kd x' is stable for dt^2 ke / m + 2 dt kd / m < 4.
    gamma, omega_sq = 100.0 / 0.01, 1.0e4 / 0.01
    assert report.max_stable_dt == pytest.approx((np.sqrt(gamma**2 + 4.0 * omega_sq) - gamma) / omega_sq, rel=1e-4)
    assert "substeps" in report.message and "contact_kd" in report.message
    with pytest.warns(ContactWarning, match="time step"):
        gs.simulate(top, par, st, frames=1, substeps=16, integrator=gs.physics.SemiImplicitEuler(implicit_contact=False))
    assert contact_report(top, par, st, dt=1.0e-4, implicit=False).stable
    implicit = contact_report(top, par, st, dt=1.0 / 60.0 / 16)
    assert implicit.stable and implicit.max_stable_dt == pytest.approx(2.0 * np.sqrt(0.01 / 1.0e4), rel=1e-6)  # m: 0.01 in float32
    with warnings.catch_warnings():
        warnings.simplefilter("error", ContactWarning)
        gs.simulate(top, par, st, frames=1, substeps=16)
    late = contact_report(top, par, st, dt=1.0 / 60.0 / 4)
    assert not late.stable and "dt^2 ke / m < 4" in late.message and "contact_kd" not in late.message
    with pytest.warns(ContactWarning, match="time step"):
        gs.simulate(top, par, st, frames=1, substeps=4)
