"""Reference motions of cloth against static colliders from NVIDIA Warp 1.8.1 (`warp.sim`), for
tests/physics/test_physics_colliders_warp.py: writes tests/data/warp_colliders.json (the scenes) and .npz (the
particle positions of every frame).

Warp is no dependency of gradsim-jax; run this with a Python that has it (it installs from the package index and
runs on a CPU):

    python -m venv /tmp/warpenv && /tmp/warpenv/bin/pip install warp-lang==1.8.1 numpy
    /tmp/warpenv/bin/python tools/warp_colliders.py

Each scene: a cloth grid (Warp's `add_cloth_grid`, no bending) released above a static shape (`add_shape_sphere`
or `add_shape_box` on body -1), semi-implicit Euler (`SemiImplicitIntegrator`), `wp.sim.collide` before every
step (soft contacts within `soft_contact_margin`), no ground. Warp averages a particle's and a shape's contact
coefficients (0.5 (soft_contact_ke + shape ke), ...): both are set to the same values, which are then the pair's.
Its particle-shape friction is limited by mu |c ke| (the elastic force alone) and its damping is explicit; the
frictionless scenes compare the models where they coincide, the one with friction shows what that limit changes.

Gradients (GRADIENT_SCENES): the cloth thrown sideways (GRADIENT_VELOCITY) onto each shape, 15 frames; d(mean
over particles of |x_final|^2) / d(every particle's initial velocity) by `wp.Tape`. Each step gets its own soft
contact arrays (`Model.allocate_soft_contacts` before `collide`): `collide` overwrites the model's arrays every
step, so with one set the backward pass of every step reads the last step's contacts, and the gradient came out
NaN for every particle once the cloth touched the box (and before, within the contact margin, for the sphere).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import warp as wp
import warp.sim
from warp_rollout import frames

OUT = Path(__file__).resolve().parents[1] / "tests" / "data"

SCENES = {
    "sphere": dict(shape="sphere", pos=[0.0, 0.0, 0.0], rot_axis=[0.0, 0.0, 1.0], rot_angle=0.0, radius=0.5,
                   half_extents=None, mu=0.0),
    "box": dict(shape="box", pos=[0.1, 0.0, 0.0], rot_axis=[0.0, 0.0, 1.0], rot_angle=0.3, radius=None,
                half_extents=[0.4, 0.3, 0.5], mu=0.0),
    "sphere_friction": dict(shape="sphere", pos=[0.0, 0.0, 0.0], rot_axis=[0.0, 0.0, 1.0], rot_angle=0.0, radius=0.5,
                            half_extents=None, mu=0.5),
}
GRADIENT_SCENES = ("sphere", "box")
GRADIENT_FRAMES = 15
GRADIENT_VELOCITY = [0.4, 0.0, 0.15]
COMMON = dict(dim_x=8, dim_y=8, cell=0.15, cloth_pos=[-0.6, 0.7, 0.6], mass=0.01, tri_ke=200.0, tri_ka=200.0,
              tri_kd=1.0, particle_radius=0.01, ke=1.0e4, kd=1.0, kf=1.0, gravity=-9.81, fps=30.0, frames=45,
              substeps=48)


def build(scene: dict, velocity=(0.0, 0.0, 0.0), requires_grad: bool = False):
    """(the finalized Model, the settings) of a scene."""
    c = {**COMMON, **scene}
    builder = wp.sim.ModelBuilder(gravity=c["gravity"])
    flat = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), -0.5 * np.pi)  # the x-y grid into x-z
    builder.add_cloth_grid(pos=wp.vec3(*c["cloth_pos"]), rot=flat, vel=wp.vec3(*velocity), dim_x=c["dim_x"],
                           dim_y=c["dim_y"], cell_x=c["cell"], cell_y=c["cell"], mass=c["mass"], tri_ke=c["tri_ke"],
                           tri_ka=c["tri_ka"], tri_kd=c["tri_kd"], edge_ke=0.0, edge_kd=0.0,
                           particle_radius=c["particle_radius"])
    rot = wp.quat_from_axis_angle(wp.vec3(*c["rot_axis"]), float(c["rot_angle"]))
    kw = dict(body=-1, pos=wp.vec3(*c["pos"]), rot=rot, ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"])
    if c["shape"] == "sphere":
        builder.add_shape_sphere(radius=c["radius"], **kw)
    else:
        builder.add_shape_box(hx=c["half_extents"][0], hy=c["half_extents"][1], hz=c["half_extents"][2], **kw)
    model = builder.finalize("cpu", requires_grad=requires_grad)
    model.ground = False
    model.soft_contact_ke, model.soft_contact_kd = c["ke"], c["kd"]
    model.soft_contact_kf, model.soft_contact_mu = c["kf"], c["mu"]
    return model, c


@wp.kernel
def _mean_square(x: wp.array(dtype=wp.vec3), scale: float, loss: wp.array(dtype=float)):
    t = wp.tid()
    wp.atomic_add(loss, 0, wp.dot(x[t], x[t]) * scale)


def gradient(scene: dict) -> tuple[np.ndarray, np.ndarray]:
    """(final positions [n, 3], d loss / d initial velocities [n, 3]) of the thrown cloth (module docstring)."""
    model, c = build(scene, GRADIENT_VELOCITY, requires_grad=True)
    integrator = wp.sim.SemiImplicitIntegrator()
    steps = GRADIENT_FRAMES * c["substeps"]
    states = [model.state(requires_grad=True) for _ in range(steps + 1)]
    dt = 1.0 / c["fps"] / c["substeps"]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for i in range(steps):
            states[i].clear_forces()
            model.allocate_soft_contacts(model.soft_contact_max, requires_grad=True)  # this step's own contacts
            wp.sim.collide(model, states[i])
            integrator.simulate(model, states[i], states[i + 1], dt)
        wp.launch(_mean_square, dim=model.particle_count, inputs=[states[steps].particle_q, 1.0 / model.particle_count,
                                                                   loss])
    tape.backward(loss)
    return states[steps].particle_q.numpy().copy(), states[0].particle_qd.grad.numpy().copy()


def run(scene: dict) -> np.ndarray:
    model, c = build(scene)
    return np.stack(frames(model, wp.sim.SemiImplicitIntegrator(), model.state(), model.state(), c,
                           lambda s: s.particle_q.numpy().copy()))


def main() -> None:
    wp.init()
    data = {name: run(scene) for name, scene in SCENES.items()}
    for name in GRADIENT_SCENES:
        data[name + "_thrown_x"], data[name + "_thrown_grad_v0"] = gradient(SCENES[name])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "warp_colliders.json").write_text(json.dumps({"warp": wp.config.version, "common": COMMON,
                                                         "scenes": SCENES, "gradient_frames": GRADIENT_FRAMES,
                                                         "gradient_velocity": GRADIENT_VELOCITY}, indent=1))
    np.savez_compressed(OUT / "warp_colliders.npz", **{k: v.astype(np.float32) for k, v in data.items()})
    for name, x in data.items():
        print(name, x.shape, "finite" if np.all(np.isfinite(x)) else "NOT FINITE")


if __name__ == "__main__":
    main()
