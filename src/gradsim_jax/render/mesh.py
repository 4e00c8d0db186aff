"""The one seam from simulation state to render vertices.

A scene renders as one triangle mesh: the particles as they are (cloth, FEM soft bodies) followed by the
rigid bodies' hull vertices, each body's placed by its pose (x + R(q) r), then the static colliders' meshes
(`physics.colliders`: spheres, boxes and capsules; planes are not drawn), then the kinds defined outside the
package (`Topology.bodies`) that have a drawing (`render.drawings.DRAWINGS`, in the order of that dict), then
an ODE body's (`physics.ode`: a pendulum's bobs and rods, a ball). `scene_faces` gives the one faces array that
indexes those vertices: the cloth triangles, the soft bodies' surface triangles, every body's faces offset by the
particle count, the colliders', the drawn kinds' and then the ODE body's faces offset by the vertices before them.
The renderer never learns where vertices came from.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.colliders import collider_faces, collider_vertex_count, collider_vertices
from gradsim_jax.physics.rigid import world_vertices
from gradsim_jax.render.drawings import DRAWINGS, drawn_faces, drawn_kinds


def scene_vertices(topology, params, state):
    """Render vertices [n + m, 3] m of one state: particle positions, then world hull vertices.

    Then the colliders' mesh vertices (kinematic ones where the state puts them), the drawn kinds' of
    `Topology.bodies` (`render.drawings`) and an ODE body's vertices.

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state: one `State` (no leading frame axis).

    Returns:
        [V, 3] m, the render vertices indexed by `scene_faces`.
    """
    parts = [state.particles.x]
    if topology.rigid.vertex_body.shape[0]:
        parts.append(world_vertices(topology.rigid, params.rigid, state.rigid).astype(state.particles.x.dtype))
    if _has_collider_mesh(topology):
        colliders = params.colliders
        if getattr(state, "colliders", None) is not None:  # kinematic: where they are at the state's time
            colliders = dataclasses.replace(colliders, position=state.colliders.position,
                                            rotation=state.colliders.rotation)
        parts.append(collider_vertices(topology.colliders, colliders).astype(state.particles.x.dtype))
    for name in drawn_kinds(topology):
        parts.append(DRAWINGS[name].vertices(topology.bodies[name], params.bodies[name], state.bodies[name])
                     .astype(state.particles.x.dtype))
    if _has_ode(topology, state):
        parts.append(topology.ode.system.vertices(params.ode, state.ode).astype(state.particles.x.dtype))
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=0)


def _has_collider_mesh(topology) -> bool:
    return topology.colliders is not None and collider_vertex_count(topology.colliders) > 0


def _has_ode(topology, state) -> bool:
    return topology.ode is not None and state.ode is not None


def trajectory_vertices(topology, params, trajectory):
    """Render vertices [T, n + m, 3] of a trajectory (leading axis: frames).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        trajectory: a `State` whose leaves have a leading frame axis T.

    Returns:
        [T, V, 3] m, `scene_vertices` of every frame.
    """
    if not (topology.rigid.vertex_body.shape[0] or _has_ode(topology, trajectory) or _has_collider_mesh(topology)
            or drawn_kinds(topology)):
        return trajectory.particles.x
    return jax.vmap(lambda s: scene_vertices(topology, params, s))(trajectory)


def scene_faces(topology) -> np.ndarray:
    """Faces [F, 3] int32 over `scene_vertices`: cloth triangles, FEM surface triangles (particle indices
    both), then body faces offset by the particle count, then an ODE body's offset by both (host side).

    The colliders' and then the drawn kinds' faces come between the bodies' and the ODE body's (module docstring).

    Args:
        topology: the scene's `Topology`.

    Returns:
        [F, 3] int32 faces over `scene_vertices`.
    """
    n = topology.num_particles
    cloth = np.asarray(topology.cloth.triangles, np.int32).reshape(-1, 3)
    fem = np.asarray(topology.fem.surface, np.int32).reshape(-1, 3)
    bodies = np.asarray(topology.rigid.faces, np.int32).reshape(-1, 3) + n
    parts = [cloth, fem, bodies]
    offset = n + int(np.shape(topology.rigid.vertex_body)[0])
    if _has_collider_mesh(topology):
        parts.append(collider_faces(topology.colliders) + offset)
        offset += collider_vertex_count(topology.colliders)
    if drawn_kinds(topology):
        drawn, offset = drawn_faces(topology, offset)
        parts += drawn
    if topology.ode is not None:
        parts.append(np.asarray(topology.ode.faces, np.int32).reshape(-1, 3) + offset)
    return np.concatenate(parts).astype(np.int32)
