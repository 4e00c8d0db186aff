"""gradSim's demo cloth: a 20 x 10 cloth hanging from two springs attached to two fixed anchors."""

from __future__ import annotations

import numpy as np

from gradsim_jax.geometry import Scene, cloth_grid, particles, quat_from_axis_angle

# Frame rate and substeps of gradSim's cloth demo: 60 fps, 32 substeps.
DEMO_FRAME_DT = 1.0 / 60.0
DEMO_SUBSTEPS = 32


def gradsim_demo_cloth(
    dim_x: int = 20,
    dim_y: int = 10,
    cell: float = 0.1,
    *,
    mass: float = 1.0,
    vel=(1.0, 0.0, 0.0),
    tri_ke: float = 1.0e4,
    tri_ka: float = 1.0e4,
    tri_kd: float = 100.0,
    anchor_ke: float = 1.0e4,
    anchor_kd: float = 1.0e3,
    bend_ke: float = 0.0,
    tri_drag: float = 0.0,
) -> Scene:
    """The cloth of gradSim's cloth demo (as also simulated by NVIDIA Warp for our golden data).

    The grid starts at (-2, 1.5, 0), rotated by 0.04 pi + pi about x (so that it faces the camera tilted),
    particle `mass` kg each, initial velocity `vel`. Two fixed anchors at (-2, 2, 0) and (dim_x cell - 2,
    2, 0) hold the corners 0 and dim_x of the first row with springs (ke, kd), rest length = initial
    distance. Particle indices: the cloth's (dim_x + 1)(dim_y + 1) first, then the two anchors.

    Args:
        dim_x: cells along the grid's x.
        dim_y: cells along the grid's y.
        cell: m, the side of a square cell.
        mass: kg per particle.
        vel: [3] m/s, the initial velocity of every cloth particle.
        tri_ke: N/m, the membrane's stiffness k_mu (`physics.cloth.ClothParams`).
        tri_ka: the membrane's area stiffness k_lambda (same unit as tri_ke).
        tri_kd: the membrane's damping k_damp.
        anchor_ke: N/m, the stiffness of the two anchor springs.
        anchor_kd: N s/m, the damping of the two anchor springs.
        bend_ke: N m/rad, the bending stiffness; 0: none.
        tri_drag: the triangles' aerodynamic drag coefficient (`physics.cloth`).

    Returns:
        The `Scene` (not built).
    """
    cloth = cloth_grid(
        dim_x, dim_y, cell, cell, pos=(-2.0, 1.5, 0.0), rot=quat_from_axis_angle((1.0, 0.0, 0.0), 1.04 * np.pi),
        vel=vel, mass=mass, tri_ke=tri_ke, tri_ka=tri_ka, tri_kd=tri_kd, bend_ke=bend_ke, tri_drag=tri_drag,
    )
    n = cloth.num_particles
    anchors = particles([[-2.0, 2.0, 0.0], [dim_x * cell - 2.0, 2.0, 0.0]], mass=0.0)
    return (cloth + anchors).add_springs([[n, 0], [n + 1, dim_x]], anchor_ke, anchor_kd)
