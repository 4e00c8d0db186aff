"""Cross-check of the static colliders against NVIDIA Warp 1.8.1 (tests/data/warp_colliders.*, made by
tools/warp_colliders.py): an 8 x 8 cloth dropped on a sphere, on a rotated box, and on a sphere with friction,
1.5 s at 48 substeps a frame (2160 steps), every particle's position at every frame."""

import json
from pathlib import Path

import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import SemiImplicitEuler

DATA = Path(__file__).resolve().parents[1] / "data"


def _scene(name):
    cfg = json.loads((DATA / "warp_colliders.json").read_text())
    c = {**cfg["common"], **cfg["scenes"][name]}
    flat = np.asarray(gs.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), -np.pi / 2))
    cloth = gs.cloth_grid(c["dim_x"], c["dim_y"], c["cell"], c["cell"], pos=c["cloth_pos"], rot=flat, mass=c["mass"],
                          tri_ke=c["tri_ke"], tri_ka=c["tri_ka"], tri_kd=c["tri_kd"], bend_ke=0.0, bend_kd=0.0)
    rotation = np.asarray(gs.quat_from_axis_angle(np.array(c["rot_axis"]), c["rot_angle"]))
    size = {"radius": c["radius"]} if c["shape"] == "sphere" else {"half_extents": c["half_extents"]}
    shape = gs.collider(c["shape"], c["pos"], rotation=rotation, ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"], **size)
    built = gs.combine(cloth, shape).build(gravity=(0.0, c["gravity"], 0.0), particle_radius=c["particle_radius"])
    return c, built, np.load(DATA / "warp_colliders.npz")[name]


@pytest.mark.parametrize("name,implicit", [("sphere", False), ("box", False), ("sphere_friction", False),
                                           ("sphere_friction", True)])
def test_cloth_on_colliders_follows_warp(name, implicit):
    c, (topology, params, state), reference = _scene(name)
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
