"""Blender's cloth settings restated in SI units, for a scene that moves as Blender's cloth does.

Blender's cloth solver (the mass-spring model with angular bending, Blender 2.8 to 5.0; read from its source, not
copied) puts a linear spring on every edge of the mesh (a triangle mesh has no shear springs: the diagonal a
quad is split along is an edge like the others), damps each spring along its length, damps every vertex's
velocity linearly (its "air damping"), and steps all of it by one linearized backward Euler step per substep,
`quality` substeps a frame. It works in frame units: time is counted in frames, so a stiffness converts to SI by
fps^2 and a damping by fps, and gravity enters scaled by 0.001 (a free fall reaches 0.001 fps^2 g: 0.9 g at 30
fps). Each edge gets the same stiffness, the `tension` setting over the mean rest length of all edges.

`blender_cloth(fps, ...)` gives the `[material]` and `[simulation]` values of the same cloth here: springs on
every edge (`spring_ke`, `spring_kd`), the particles' linear `air_damping`, the vertex mass, the effective
gravity and the integrator's substeps. With them and `integrator = "implicit"`, `gradsim_jax.physics.
ImplicitEuler` follows Blender's swinging cloth to 0.04 % of its size over 45 frames
(tests/physics/test_physics_blender.py; benchmarks/blender). Not restated: the compression stiffness when it
differs from the tension (our springs resist both alike), the angular bending (its hinge force has no counterpart
here; left out of a replica of Blender's solver, it changed the match to Blender's swinging cloth by 0.002 % of the
cloth's size), and the
collision response (a distance kept by impulses, not a penalty).
"""

from __future__ import annotations

import numpy as np

#: Blender's cloth scales the scene's gravity by this in its frame units (per frame^2).
GRAVITY_SCALE = 0.001
#: Blender's air damping setting is this many kg per frame per unit, on each vertex.
AIR_DAMPING_SCALE = 0.01


def blender_cloth(fps: float, mean_edge: float, *, mass: float = 0.3, tension: float = 15.0,
                  tension_damping: float = 5.0, air_damping: float = 1.0, quality: int = 5,
                  scene_gravity: float = 9.81) -> dict:
    """The SI values of a Blender cloth (module docstring): what to write in a scene file.

    Args:
        fps: the Blender scene's frame rate (its cloth works per frame).
        mean_edge: m, the mean rest length of all the mesh's edges, diagonals included (0.0566 for a grid of 5 cm
            cells split into triangles).
        mass: Blender's `mass` setting, kg per vertex.
        tension: Blender's `tension_stiffness` (its compression stiffness is taken to be the same).
        tension_damping: Blender's `tension_damping` (and compression damping).
        air_damping: Blender's `air_damping`.
        quality: Blender's `quality`, substeps per frame.
        scene_gravity: m/s^2, the magnitude of the Blender scene's gravity.

    Returns:
        {"mass": kg per particle, "spring_ke": N/m, "spring_kd": N s/m, "air_damping": 1/s (the particles'
        linear damping rate), "gravity": m/s^2 (what the cloth falls at), "substeps": per frame}.

    Raises:
        ValueError: for a frame rate, edge length, mass or quality that is not positive.
    """
    for name, value in (("fps", fps), ("mean_edge", mean_edge), ("mass", mass), ("quality", quality)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"blender_cloth: {name} must be positive, got {value}")
    return {
        "mass": float(mass),
        "spring_ke": float(fps ** 2 * tension / mean_edge),
        "spring_kd": float(fps * tension_damping),
        "air_damping": float(AIR_DAMPING_SCALE * fps * air_damping / mass),
        "gravity": float(GRAVITY_SCALE * fps ** 2 * scene_gravity),
        "substeps": int(quality),
    }
