"""FEM soft bodies as `Scene` pieces (`soft_body`): a tet mesh with its material, placed and given its particles'
masses (`physics.fem`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry import tets as tetmesh
from gradsim_jax.geometry.rotations import quat_rotate
from gradsim_jax.geometry.scene import (
    DEFAULT_DENSITY, DEFAULT_K_DAMP, DEFAULT_K_LAMBDA, DEFAULT_K_MU, Scene, require_finite, as_floats,
    pinned_mask, particles
)


def soft_body(
    vertices,
    tets,
    *,
    density: float = DEFAULT_DENSITY,
    k_mu: float = DEFAULT_K_MU,
    k_lambda: float = DEFAULT_K_LAMBDA,
    k_damp: float = DEFAULT_K_DAMP,
    pos=(0.0, 0.0, 0.0),
    rot=(1.0, 0.0, 0.0, 0.0),
    vel=(0.0, 0.0, 0.0),
    pinned=None,
    particle_volume=None,
    masses=None,
    name: str = "soft body",
) -> Scene:
    """An FEM soft body from a tetrahedral mesh (`gradsim_jax.geometry.tets`: box_tets, ...).

    vertices [n, 3] m, tets [k, 4] positively oriented (`check_tets` refuses inverted or degenerate tets,
    naming the first; `orient_tets` fixes a mesh written the other way round). The mesh is rotated by `rot`
    (unit quaternion w, x, y, z) about its own origin and moved by `pos` [3] m; that placement is also its
    rest shape. `vel`: [3] or [n, 3] m/s. `pinned`: optional [n] bool mask or vertex indices (kinematic).
    Lumped mass: each tet gives density V0 / 4 (kg) to each vertex (`density` kg/m^3); `particle_volume`
    (m^3, one value or [n]) makes every particle's mass density x its own volume instead (Warp's
    `add_soft_grid` gives each particle a whole cell: the cell's volume), and `masses` [n] kg sets the masses
    outright (the volumes then stay the lumped ones: a fitted "density" replaces such masses). Stable Neo-Hookean
    material per tet (`gradsim_jax.physics.fem`): k_mu, k_lambda (Pa, the Lame parameters) and k_damp (Pa s),
    one value or one per tet. Defaults: density 1000, k_mu = k_lambda = 1e5, k_damp = 10, a soft rubber that
    keeps its shape under gravity for bodies of 0.1-1 m (a 1 m cube on its base sags ~3 %). Semi-implicit
    Euler is stable for these at dt = 1e-3 s with elements of 5 cm or more, 5e-4 s with 2 cm, 1e-4 s with
    1 cm; roughly dt < 0.3 h / sqrt((k_lambda + 2 k_mu) / density) for elements of size h, so stiffer
    materials or finer meshes need smaller steps. The boundary triangles (`tet_surface`) render the body
    (`render.mesh.scene_faces`).

    Args:
        vertices: [n, 3] m, the mesh's vertices in its own frame.
        tets: [k, 4] int, vertex indices of each positively oriented tet.
        density: kg/m^3, one value or [k] (one per tet; one value only with `particle_volume`).
        k_mu: Pa, the Lame parameter mu, one value or [k].
        k_lambda: Pa, the Lame parameter lambda, one value or [k].
        k_damp: Pa s, the damping, one value or [k].
        pos: [3] m, where the mesh's origin is placed.
        rot: [4], a nonzero quaternion (w, x, y, z) rotating the mesh about its origin (normalised here).
        vel: [3] or [n, 3] m/s, initial velocities.
        pinned: None, an [n] bool mask, or vertex indices of kinematic particles.
        particle_volume: m^3, None (lumped volumes), one value, or [n] per particle.
        masses: None, or [n] kg particle masses set outright (each > 0).
        name: what error messages call the body.

    Returns:
        A `Scene` piece with the body's particles, volumes, tets, material and boundary triangles.
    """
    x, t = tetmesh.check_tets(vertices, tets, name=name)
    k, n = t.shape[0], x.shape[0]
    rot = as_floats(rot, name="rot")
    if rot.shape != (4,) or not (np.all(np.isfinite(rot)) and 0 < np.linalg.norm(rot) < np.inf):
        raise ValueError(f"soft_body needs rot = a nonzero finite quaternion (w, x, y, z), got {rot.tolist()}")
    pos, vel = as_floats(pos, (3,), "pos"), as_floats(vel, (n, 3), "vel")
    require_finite("pos", pos)
    require_finite("vel", vel)
    material = {}
    for key, value in (("density", density), ("k_mu", k_mu), ("k_lambda", k_lambda), ("k_damp", k_damp)):
        material[key] = as_floats(value, (k,), key)
        bad = ~(np.isfinite(material[key]) & (material[key] >= 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"soft_body needs a finite {key} >= 0, got {material[key][i]} (tet {i})")
    x = quat_rotate(rot / np.linalg.norm(rot), x) + pos
    if particle_volume is None:
        volume = tetmesh.lumped_masses(x, t, 1.0)
        mass = tetmesh.lumped_masses(x, t, material["density"])
    else:
        if np.size(density) != 1:
            raise ValueError("soft_body: particle_volume takes one density (kg/m^3), not one per tet")
        volume = as_floats(particle_volume, (n,), "particle_volume")
        bad = ~(np.isfinite(volume) & (volume > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"soft_body needs a finite particle_volume > 0 (m^3), got {volume[i]} (particle {i})")
        mass = material["density"][0] * volume
    if masses is not None:
        mass = as_floats(masses, (n,), "masses")
        bad = ~(np.isfinite(mass) & (mass > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"soft_body needs finite masses > 0 (kg; pin a particle to hold it), got {mass[i]} "
                             f"(particle {i})")
    piece = dataclasses.replace(particles(x, vel, mass, pinned_mask(pinned, n)), volume=volume)
    return dataclasses.replace(piece, tets=t, tet_k_mu=material["k_mu"], tet_k_lambda=material["k_lambda"],
                               tet_k_damp=material["k_damp"], tet_surface=tetmesh.tet_surface(t))
