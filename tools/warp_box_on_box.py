"""Reference motions of a box dropped onto a box from NVIDIA Warp 1.8.1 (`warp.sim`), for
tests/physics/test_physics_bodycontact_warp.py: writes tests/data/warp_box_on_box.json (the scenes) and .npz (the
bodies' poses at every frame, and one gradient).

Warp is no dependency of gradsim-jax; run this with a Python that has it (it installs from the package index and
runs on a CPU):

    python -m venv /tmp/warpenv && /tmp/warpenv/bin/pip install warp-lang==1.8.1 numpy
    /tmp/warpenv/bin/python tools/warp_box_on_box.py

Scenes (SCENES): a 1 kg box (0.2 x 0.16 x 0.2 m) released 3-5 cm above a wider box, moving sideways at 0.2-0.3 m/s
and spinning about the vertical at 1 rad/s, for 1.5 s (45 frames of 64 substeps, semi-implicit Euler,
`wp.sim.collide` before every step, angular damping 0). "static": the lower box is a static shape (body -1);
"stacked": it is a free 4 kg body resting on the ground plane; "tilted": as "static", the upper box turned 0.4 rad
so that it lands on a corner. Warp averages the two shapes' coefficients; both carry the same.

Frictionless (mu = kf = 0), because Warp 1.8.1's rigid friction is not Coulomb's (tools/warp_box_slide_repro.py):
`eval_rigid_contacts` divides the tangential velocity by `wp.norm_huber(vt, delta)`, which is delta (|vt| -
delta / 2) above delta, not a length, so its "unit" direction is about 1 / delta long and the force is kf vt per
contact point, uncapped by mu fn. The two contact sets also differ (Warp: a box's vertices and the nearest points
of its edges, 8 points at the corners of a face lying flat, up to 3 at a corner; ours: vertices and inset face
corners, 10 on a face), and a penalty's resting depth and damping scale with the number of points: the comparison
is of the motion both models share: the normal spring, the landing, free sliding and spinning on a frictionless
face.

Gradient (GRADIENT_SCENE, GRADIENT_FRAMES): d(sum over the upper box's corners k = 0..7 of (k + 1) |corner_k|^2 /
36) / d(both bodies' initial velocities (angular, linear: Warp's body_qd)) by `wp.Tape`; corner k at
((-1)^(k+1) hx, (-1)^(k//2+1) hy, (-1)^(k//4+1) hz) in the body (unequal weights, or a turn about the centre would
not change the loss). Each step gets its own rigid contact arrays (`Model.allocate_rigid_contacts`): `collide`
overwrites the model's arrays every step, and the backward pass of every step would read the last step's
contacts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import warp as wp
import warp.sim
from warp_rollout import frames

OUT = Path(__file__).resolve().parents[1] / "tests" / "data"

UPPER = dict(half=[0.1, 0.08, 0.1], mass=1.0)
SCENES = {
    "static": dict(lower_half=[0.6, 0.1, 0.4], lower_mass=0.0, lower_pos=[0.0, 0.0, 0.0],
                   upper_pos=[-0.35, 0.21, 0.0], upper_vel=[0.3, 0.0, 0.05], upper_omega=[0.0, 1.0, 0.0]),
    "stacked": dict(lower_half=[0.3, 0.1, 0.3], lower_mass=4.0, lower_pos=[0.0, 0.1, 0.0],
                    upper_pos=[-0.15, 0.31, 0.0], upper_vel=[0.2, 0.0, 0.05], upper_omega=[0.0, 1.0, 0.0]),
    "tilted": dict(lower_half=[0.6, 0.1, 0.4], lower_mass=0.0, lower_pos=[0.0, 0.0, 0.0],
                   upper_pos=[-0.35, 0.25, 0.0], upper_vel=[0.3, 0.0, 0.05], upper_omega=[0.0, 1.0, 0.0],
                   upper_axis=[1.0, 0.0, 0.3], upper_angle=0.4),
}
GRADIENT_SCENE = "stacked"
GRADIENT_FRAMES = 15
COMMON = dict(ke=1.0e4, kd=100.0, kf=0.0, mu=0.0, gravity=-9.81, fps=30.0, frames=45, substeps=64)


def build(scene: dict, requires_grad: bool = False):
    """(the finalized Model, the settings, the upper body's index) of a scene."""
    c = {**COMMON, **UPPER, **scene}
    b = wp.sim.ModelBuilder(gravity=c["gravity"])
    mat = dict(ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"])
    lh = c["lower_half"]
    if c["lower_mass"] > 0.0:
        lower = b.add_body(origin=wp.transform(wp.vec3(*c["lower_pos"]), wp.quat_identity()))
        density = float(c["lower_mass"] / (8 * np.prod(lh)))
        b.add_shape_box(body=lower, hx=lh[0], hy=lh[1], hz=lh[2], density=density, **mat)
        b.set_ground_plane(**mat)
    else:
        b.add_shape_box(body=-1, pos=wp.vec3(*c["lower_pos"]), hx=lh[0], hy=lh[1], hz=lh[2], **mat)
    tilt = wp.quat_from_axis_angle(wp.normalize(wp.vec3(*c.get("upper_axis", [1.0, 0.0, 0.0]))),
                                   float(c.get("upper_angle", 0.0)))
    upper = b.add_body(origin=wp.transform(wp.vec3(*c["upper_pos"]), tilt))
    uh = c["half"]
    b.add_shape_box(body=upper, hx=uh[0], hy=uh[1], hz=uh[2], density=float(c["mass"] / (8 * np.prod(uh))), **mat)
    model = b.finalize("cpu", requires_grad=requires_grad)
    model.ground = c["lower_mass"] > 0.0
    return model, c, upper


def initial_state(model, c, upper: int, requires_grad: bool = False):
    state = model.state(requires_grad=requires_grad)
    qd = state.body_qd.numpy()
    qd[upper] = np.concatenate([c["upper_omega"], c["upper_vel"]])
    state.body_qd.assign(qd)
    return state


def run(scene: dict) -> np.ndarray:
    """Body poses [frames + 1, bodies, 7] (x, y, z, qx, qy, qz, qw: Warp's transform)."""
    model, c, upper = build(scene)
    return np.stack(frames(model, wp.sim.SemiImplicitIntegrator(angular_damping=0.0), initial_state(model, c, upper),
                           model.state(), c, lambda s: s.body_q.numpy().copy()))


@wp.kernel
def _corner_loss(body_q: wp.array(dtype=wp.transform), body: int, half: wp.vec3, loss: wp.array(dtype=float)):
    t = wp.tid()
    sx = float(2 * (t % 2) - 1)
    sy = float(2 * ((t // 2) % 2) - 1)
    sz = float(2 * (t // 4) - 1)
    p = wp.transform_point(body_q[body], wp.vec3(sx * half[0], sy * half[1], sz * half[2]))
    wp.atomic_add(loss, 0, wp.dot(p, p) * float(t + 1) / 36.0)


def gradient(scene: dict) -> tuple[np.ndarray, np.ndarray]:
    """(final poses [bodies, 7], d loss / d initial body_qd [bodies, 6]) of the module docstring's loss."""
    model, c, upper = build(scene, requires_grad=True)
    integrator = wp.sim.SemiImplicitIntegrator(angular_damping=0.0)
    steps = GRADIENT_FRAMES * c["substeps"]
    states = [initial_state(model, c, upper, requires_grad=True)]
    states += [model.state(requires_grad=True) for _ in range(steps)]
    dt = 1.0 / c["fps"] / c["substeps"]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for i in range(steps):
            states[i].clear_forces()
            model.allocate_rigid_contacts(requires_grad=True)  # this step's own contacts
            wp.sim.collide(model, states[i])
            integrator.simulate(model, states[i], states[i + 1], dt)
        wp.launch(_corner_loss, dim=8, inputs=[states[steps].body_q, upper, wp.vec3(*c["half"]), loss])
    tape.backward(loss)
    return states[steps].body_q.numpy().copy(), states[0].body_qd.grad.numpy().copy()


def main() -> None:
    wp.init()
    data = {name: run(scene) for name, scene in SCENES.items()}
    data["thrown_q"], data["thrown_grad_qd"] = gradient(SCENES[GRADIENT_SCENE])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "warp_box_on_box.json").write_text(json.dumps({
        "warp": wp.config.version, "common": COMMON, "upper": UPPER, "scenes": SCENES,
        "gradient_scene": GRADIENT_SCENE, "gradient_frames": GRADIENT_FRAMES}, indent=1))
    np.savez_compressed(OUT / "warp_box_on_box.npz", **{k: v.astype(np.float32) for k, v in data.items()})
    for name, x in data.items():
        print(name, x.shape, "finite" if np.all(np.isfinite(x)) else "NOT FINITE")
    print("final poses:", {k: data[k][-1].round(4).tolist() for k in SCENES})
    print("gradient:", data["thrown_grad_qd"].round(5).tolist())


if __name__ == "__main__":
    main()
