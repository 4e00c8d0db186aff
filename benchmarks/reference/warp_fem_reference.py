"""Write tests/data/warp_fem.npz: per-particle tetrahedral forces from NVIDIA Warp 1.8.1's `eval_tetrahedra`.

Run it in a virtual environment of its own (Warp is no dependency of gradsim-jax):

    python -m venv /tmp/warpenv && /tmp/warpenv/bin/pip install warp-lang==1.8.1 numpy
    /tmp/warpenv/bin/python benchmarks/reference/warp_fem_reference.py

The mesh is a 2 x 1 x 1 box of 0.2 x 0.1 x 0.1 m, six tets per cube cell (one per axis order along the main
diagonal), deformed at random (one tet inverted), with random velocities, per-tet materials and
activations. Two cases: k_damp = 0 (our forces must equal Warp's) and k_damp > 0 (they differ by Warp's
volume damping with absolute velocities, which `tests/physics/test_physics_fem.py` accounts for).
Warp computes in float32.
"""

import itertools
from pathlib import Path

import numpy as np
import warp as wp
import warp.sim
from warp.sim.integrator_euler import eval_tetrahedra

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "warp_fem.npz"


def box_mesh():
    """Vertices [12, 3] and positively oriented tets [12, 4] of two unit cells scaled to 0.2 x 0.1 x 0.1 m."""
    nx, ny, nz = 2, 1, 1
    grid = np.stack(np.meshgrid(np.arange(nx + 1), np.arange(ny + 1), np.arange(nz + 1), indexing="ij"), -1)
    vertices = grid.reshape(-1, 3) * 0.1
    index = lambda i, j, k: (i * (ny + 1) + j) * (nz + 1) + k  # noqa: E731
    tets = []
    for i, j, k in itertools.product(range(nx), range(ny), range(nz)):
        for order in itertools.permutations(range(3)):
            bits, path = [0, 0, 0], [index(i, j, k)]
            for axis in order:
                bits[axis] = 1
                path.append(index(i + bits[0], j + bits[1], k + bits[2]))
            tets.append(path)
    tets = np.array(tets)
    e = vertices[tets[:, 1:]] - vertices[tets[:, :1]]
    negative = np.einsum("ij,ij->i", e[:, 0], np.cross(e[:, 1], e[:, 2])) < 0
    tets[negative, 2], tets[negative, 3] = tets[negative, 3], tets[negative, 2].copy()
    return vertices, tets


def warp_forces(rest, tets, x, v, k_mu, k_lambda, k_damp, activation):
    builder = warp.sim.ModelBuilder()
    for p in rest:
        builder.add_particle(tuple(p), (0.0, 0.0, 0.0), 1.0)
    for t, mu, lam, damp in zip(tets, k_mu, k_lambda, k_damp):
        builder.add_tetrahedron(*(int(i) for i in t), k_mu=float(mu), k_lambda=float(lam), k_damp=float(damp))
    model = builder.finalize(device="cpu")
    f = wp.zeros(len(rest), dtype=wp.vec3, device="cpu")
    wp.launch(eval_tetrahedra, dim=len(tets), device="cpu",
              inputs=[wp.array(x, dtype=wp.vec3, device="cpu"), wp.array(v, dtype=wp.vec3, device="cpu"),
                      model.tet_indices, model.tet_poses, wp.array(activation, dtype=float, device="cpu"),
                      model.tet_materials],
              outputs=[f])
    return f.numpy().astype(np.float64)


def main():
    wp.init()
    rng = np.random.default_rng(0)
    rest, tets = box_mesh()
    k = len(tets)
    x = rest + 0.01 * rng.standard_normal(rest.shape)
    x[11] = x[10] + (x[10] - x[11]) * 0.3  # pull a corner through its tets' opposite faces: inverted tets
    v = rng.standard_normal(rest.shape)
    k_mu = rng.uniform(5e3, 2e4, k)
    k_lambda = rng.uniform(5e3, 2e4, k)
    k_damp = rng.uniform(1.0, 10.0, k)
    activation = rng.uniform(-0.2, 0.2, k)
    forces = warp_forces(rest, tets, x, v, k_mu, k_lambda, np.zeros(k), activation)
    forces_damped = warp_forces(rest, tets, x, v, k_mu, k_lambda, k_damp, activation)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, rest=rest, tets=tets.astype(np.int32), x=x, v=v, k_mu=k_mu, k_lambda=k_lambda, k_damp=k_damp,
             activation=activation, forces=forces, forces_damped=forces_damped, warp_version=wp.config.version)
    print(f"wrote {OUT} (warp {wp.config.version}, {k} tets)")


if __name__ == "__main__":
    main()
