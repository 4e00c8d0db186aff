"""Simulate a cloth scene of ours with NVIDIA Warp 1.8.1's `warp.sim` (semi-implicit Euler, particle-ground
penalty contact) and write its particle positions per frame: the motion behind `bench_friction.py`'s target.

Run it with an interpreter that has Warp (Warp is no dependency of gradsim-jax):

    python -m venv /tmp/warpenv && /tmp/warpenv/bin/pip install warp-lang==1.8.1 numpy
    /tmp/warpenv/bin/python benchmarks/reference/warp_skid.py SCENE.npz OUT.npz

SCENE.npz (written by bench_friction.py from our builders): x, v [n, 3], mass [n], triangles [t, 3],
tri_ke, tri_ka, tri_kd [t], radius, contact_ke, contact_kd, contact_kf, contact_mu, gravity [3], dt, substeps,
frames. The model is built from those very arrays; triangle-triangle and particle-particle contact are off,
so that both engines compute the same forces. OUT.npz: x [frames + 1, n, 3] (float32, as Warp computes).
"""

import sys

import numpy as np
import warp as wp
import warp.sim


def main(scene_path, out_path):
    wp.config.quiet = True
    wp.init()
    d = np.load(scene_path)
    builder = warp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=float(d["gravity"][1]))
    for x, v, m in zip(d["x"], d["v"], d["mass"]):
        builder.add_particle(tuple(map(float, x)), tuple(map(float, v)), float(m), radius=float(d["radius"]))
    t = d["triangles"]
    zeros = np.zeros(len(t))
    builder.add_triangles(t[:, 0], t[:, 1], t[:, 2], d["tri_ke"], d["tri_ka"], d["tri_kd"], zeros, zeros)
    builder.set_ground_plane(normal=(0.0, 1.0, 0.0), offset=0.0)
    model = builder.finalize("cpu")
    model.ground = True
    model.enable_tri_collisions = False
    model.particle_max_radius = 0.0  # no particle-particle contact
    model.soft_contact_ke = float(d["contact_ke"])
    model.soft_contact_kd = float(d["contact_kd"])
    model.soft_contact_kf = float(d["contact_kf"])
    model.soft_contact_mu = float(d["contact_mu"])
    integrator = warp.sim.SemiImplicitIntegrator()
    a, b = model.state(), model.state()
    frames, substeps, dt = int(d["frames"]), int(d["substeps"]), float(d["dt"])
    out = [a.particle_q.numpy().copy()]
    for _ in range(frames):
        for _ in range(substeps):
            a.clear_forces()
            integrator.simulate(model, a, b, dt)
            a, b = b, a
        out.append(a.particle_q.numpy().copy())
    np.savez(out_path, x=np.stack(out), warp_version=wp.config.version)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
