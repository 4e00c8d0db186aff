"""Cross-check of the static colliders against NVIDIA Warp 1.8.1 (tests/data/warp_colliders.*, made by
tools/warp_colliders.py): an 8 x 8 cloth dropped on a sphere, on a rotated box, and on a sphere with friction,
1.5 s at 48 substeps a frame (2160 steps), every particle's position at every frame; and the gradient of a
final-position loss by every particle's initial velocity, the cloth thrown onto the sphere and onto the box."""

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import SemiImplicitEuler

DATA = Path(__file__).resolve().parents[1] / "data"


def _scene(name, velocity=(0.0, 0.0, 0.0)):
    cfg = json.loads((DATA / "warp_colliders.json").read_text())
    c = {**cfg, **cfg["common"], **cfg["scenes"][name]}
    flat = np.asarray(gs.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), -np.pi / 2))
    cloth = gs.cloth_grid(c["dim_x"], c["dim_y"], c["cell"], c["cell"], pos=c["cloth_pos"], rot=flat, vel=velocity,
                          mass=c["mass"], tri_ke=c["tri_ke"], tri_ka=c["tri_ka"], tri_kd=c["tri_kd"], bend_ke=0.0,
                          bend_kd=0.0)
    rotation = np.asarray(gs.quat_from_axis_angle(np.array(c["rot_axis"]), c["rot_angle"]))
    size = {"radius": c["radius"]} if c["shape"] == "sphere" else {"half_extents": c["half_extents"]}
    shape = gs.collider(c["shape"], c["pos"], rotation=rotation, ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"], **size)
    built = gs.combine(cloth, shape).build(gravity=(0.0, c["gravity"], 0.0), particle_radius=c["particle_radius"])
    return c, built, np.load(DATA / "warp_colliders.npz")


@pytest.mark.parametrize("name,implicit", [("sphere", False), ("box", False), ("sphere_friction", False),
                                           ("sphere_friction", True)])
def test_cloth_on_colliders_follows_warp(name, implicit):
    c, (topology, params, state), data = _scene(name)
    reference = data[name]
    traj = gs.simulate(topology, params, state, frames=c["frames"], substeps=c["substeps"], frame_dt=1.0 / c["fps"],
                       integrator=SemiImplicitEuler(implicit_contact=implicit))
    x = np.asarray(traj.particles.x)
    assert np.ptp(reference[:, :, 1]) > 0.3 and reference[-1, :, 1].min() < 0.0  # it fell onto the shape and over
    error = np.max(np.abs(x - reference))
    if not implicit:
        # The same explicit scheme in float32 on both sides: rounding of positions near 1 m (6e-8 each) summed
        # over 2160 steps, sqrt(2160) x 6e-8 = 3e-6 m, with margin for the contacts' amplification.
        assert error < 2e-5
    else:
        # Our default takes the contact's damping and friction backward (`physics.contact`): another model of the
        # landing, within the 1e-3 m of Warp's.
        assert error < 1e-3


@pytest.mark.parametrize("name", ["sphere", "box"])
def test_the_gradient_through_collider_contact_follows_warp(name):
    """d(mean |x_final|^2) / d(initial velocities) after 15 frames (720 steps) of the cloth thrown sideways onto
    the shape; Warp's by its tape, with each step's own contact arrays (tools/warp_colliders.py says why)."""
    cfg = json.loads((DATA / "warp_colliders.json").read_text())
    c, (topology, params, state), data = _scene(name, cfg["gradient_velocity"])

    def loss(v0):
        s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, v=v0))
        traj = gs.simulate(topology, params, s, frames=c["gradient_frames"], substeps=c["substeps"],
                           frame_dt=1.0 / c["fps"], integrator=SemiImplicitEuler(implicit_contact=False))
        x = traj.particles.x[-1]
        return (x * x).sum(-1).mean(), x

    (_, x), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(state.particles.v)
    reference = data[name + "_thrown_grad_v0"]
    assert np.max(np.abs(np.asarray(x) - data[name + "_thrown_x"])) < 2e-5  # the same run (see above)
    assert np.ptp(np.asarray(x)[:, 1]) > 0.1  # the cloth lies bent over the shape: it touched
    # Both float32: the 1e-2 relative (measured: 1.1e-4 for the box, 1.9e-6 for the sphere)
    assert np.linalg.norm(np.asarray(grad) - reference) < 1e-2 * np.linalg.norm(reference)
