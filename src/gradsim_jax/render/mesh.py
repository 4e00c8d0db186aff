"""The one seam from simulation state to render vertices.

A scene renders as one triangle mesh, built from its parts in the order of `MESH_PARTS`, each part a body
kind's `MeshPart` (its render vertices from one state, and its faces over them): the particles as they are
(cloth, FEM soft bodies), the rigid bodies' hull vertices, each body's placed by its pose (x + R(q) r), the
static colliders' meshes (`physics.colliders`: spheres, boxes and capsules; planes are not drawn), the kinds
defined outside the package (`Topology.bodies`) that have a drawing (`render.drawings.DRAWINGS`, in the order of
that dict), then an ODE body's (`physics.ode`: a pendulum's bobs and rods, a ball). `scene_faces` gives the one
faces array that indexes those vertices: each part's faces offset by the vertices of the parts before it (the
cloth triangles, the soft bodies' surface triangles, every body's faces offset by the particle count, the
colliders', the drawn kinds' and then the ODE body's). The renderer never learns where vertices came from; a
built-in kind that is drawn adds one `MeshPart` and one line to `MESH_PARTS`.
"""

from __future__ import annotations

import abc
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.colliders import collider_faces, collider_vertex_count, collider_vertices
from gradsim_jax.physics.rigid import world_vertices
from gradsim_jax.render.drawings import DRAWINGS, drawn_faces, drawn_kinds


class MeshPart(abc.ABC):
    """What one kind of body of a scene adds to the scene's mesh (module docstring); subclass it."""

    #: The part's name (`face_ranges`' key).
    name: str = ""

    @abc.abstractmethod
    def drawn(self, topology, state=None) -> bool:
        """Whether the scene has vertices of this part (static, host side).

        Args:
            topology: the scene's `Topology`.
            state: the `State` (or trajectory) to be drawn, or None when the faces are asked for.

        Returns:
            A Python bool.
        """

    @abc.abstractmethod
    def vertices(self, topology, params, state):
        """The part's render vertices in one state; traceable.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: one `State` (no leading frame axis).

        Returns:
            [v, 3] m.
        """

    @abc.abstractmethod
    def faces(self, topology, offset: int) -> tuple[list[np.ndarray], int]:
        """The part's faces over the scene's vertices, its own starting at vertex `offset` (host side).

        Args:
            topology: the scene's `Topology`.
            offset: the index of the part's first vertex among the scene's vertices.

        Returns:
            ([f, 3] int32 face arrays, the index after the part's last vertex).
        """


class ParticlesPart(MeshPart):
    """The particles as they are: the cloth's triangles and the soft bodies' surface triangles over them."""

    name = "particles"

    def drawn(self, topology, state=None) -> bool:
        """Always: the particles come first (possibly none).

        Args:
            topology: the scene's `Topology`.
            state: the `State` to be drawn, or None (not read).
        """
        return True

    def vertices(self, topology, params, state):
        """`State.particles.x`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: one `State`.
        """
        return state.particles.x

    def faces(self, topology, offset: int) -> tuple[list[np.ndarray], int]:
        """The cloth's triangles, then the FEM surface's, over the particles.

        Args:
            topology: the scene's `Topology`.
            offset: the particles' first vertex (0).
        """
        cloth = np.asarray(topology.cloth.triangles, np.int32).reshape(-1, 3) + offset
        fem = np.asarray(topology.fem.surface, np.int32).reshape(-1, 3) + offset
        return [cloth, fem], offset + topology.num_particles


class RigidPart(MeshPart):
    """The rigid bodies' hull vertices placed by their poses, and their faces."""

    name = "rigid"

    def drawn(self, topology, state=None) -> bool:
        """Whether the scene has rigid-body hull vertices.

        Args:
            topology: the scene's `Topology`.
            state: the `State` to be drawn, or None (not read).
        """
        return bool(topology.rigid.vertex_body.shape[0])

    def vertices(self, topology, params, state):
        """World hull vertices x + R(q) r (`physics.rigid.world_vertices`).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: one `State`.
        """
        return world_vertices(topology.rigid, params.rigid, state.rigid)

    def faces(self, topology, offset: int) -> tuple[list[np.ndarray], int]:
        """Every body's faces (empty without bodies).

        Args:
            topology: the scene's `Topology`.
            offset: the bodies' first vertex.
        """
        faces = np.asarray(topology.rigid.faces, np.int32).reshape(-1, 3) + offset
        return [faces], offset + int(np.shape(topology.rigid.vertex_body)[0])


class CollidersPart(MeshPart):
    """The colliders' meshes (spheres, boxes, capsules, meshes; planes are not drawn), kinematic ones where the
    state puts them."""

    name = "colliders"

    def drawn(self, topology, state=None) -> bool:
        """Whether a collider has a mesh to draw.

        Args:
            topology: the scene's `Topology`.
            state: the `State` to be drawn, or None (not read).
        """
        return topology.colliders is not None and collider_vertex_count(topology.colliders) > 0

    def vertices(self, topology, params, state):
        """`physics.colliders.collider_vertices` at the state's poses.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: one `State` (its `colliders` pose when they move).
        """
        colliders = params.colliders
        if state.colliders is not None:  # kinematic: where they are at the state's time
            colliders = dataclasses.replace(colliders, position=state.colliders.position,
                                            rotation=state.colliders.rotation)
        return collider_vertices(topology.colliders, colliders)

    def faces(self, topology, offset: int) -> tuple[list[np.ndarray], int]:
        """`physics.colliders.collider_faces`.

        Args:
            topology: the scene's `Topology`.
            offset: the colliders' first vertex.
        """
        return [collider_faces(topology.colliders) + offset], offset + collider_vertex_count(topology.colliders)


class DrawnKindsPart(MeshPart):
    """The kinds of `Topology.bodies` that have a `render.drawings.Drawing`, in the order of that dict."""

    name = "drawn"

    def drawn(self, topology, state=None) -> bool:
        """Whether a kind of `Topology.bodies` has a drawing.

        Args:
            topology: the scene's `Topology`.
            state: the `State` to be drawn, or None (not read).
        """
        return bool(drawn_kinds(topology))

    def vertices(self, topology, params, state):
        """Each drawn kind's `Drawing.vertices`, one after another.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: one `State`.
        """
        return jnp.concatenate([DRAWINGS[name].vertices(topology.bodies[name], params.bodies[name],
                                                         state.bodies[name]) for name in drawn_kinds(topology)])

    def faces(self, topology, offset: int) -> tuple[list[np.ndarray], int]:
        """`render.drawings.drawn_faces`.

        Args:
            topology: the scene's `Topology`.
            offset: the first drawn kind's first vertex.
        """
        return drawn_faces(topology, offset)


class OdePart(MeshPart):
    """An ODE body's mesh (`physics.ode.OdeSystem.vertices` and `faces`: a pendulum's bobs and rods, a ball)."""

    name = "ode"

    def drawn(self, topology, state=None) -> bool:
        """Whether the scene has an ODE body (and the state its coordinates).

        Args:
            topology: the scene's `Topology`.
            state: the `State` to be drawn (a state may leave the ODE body out), or None.
        """
        return topology.ode is not None and (state is None or state.ode is not None)

    def vertices(self, topology, params, state):
        """The system's vertices of the state's coordinates.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: one `State`.
        """
        return topology.ode.system.vertices(params.ode, state.ode)

    def faces(self, topology, offset: int) -> tuple[list[np.ndarray], int]:
        """The system's faces.

        Args:
            topology: the scene's `Topology`.
            offset: the body's first vertex.
        """
        faces = np.asarray(topology.ode.faces, np.int32).reshape(-1, 3)
        # An ODE body's vertex count is known from its state alone; its mesh uses every vertex it has.
        return [faces + offset], offset + int(faces.max(initial=-1)) + 1


#: The parts of a scene's mesh, in the order their vertices and faces come.
MESH_PARTS: tuple[MeshPart, ...] = (ParticlesPart(), RigidPart(), CollidersPart(), DrawnKindsPart(), OdePart())


def _drawn_parts(topology, state) -> list[MeshPart]:
    """The parts a state has vertices of."""
    return [p for p in MESH_PARTS if p.drawn(topology, state)]


def scene_vertices(topology, params, state):
    """Render vertices [V, 3] m of one state: every drawn part's (`MESH_PARTS`), one after another.

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state: one `State` (no leading frame axis).

    Returns:
        [V, 3] m, the render vertices indexed by `scene_faces`.
    """
    dtype = state.particles.x.dtype
    parts = [p.vertices(topology, params, state).astype(dtype) for p in _drawn_parts(topology, state)]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=0)


def trajectory_vertices(topology, params, trajectory):
    """Render vertices [T, V, 3] of a trajectory (leading axis: frames).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        trajectory: a `State` whose leaves have a leading frame axis T.

    Returns:
        [T, V, 3] m, `scene_vertices` of every frame.
    """
    if len(_drawn_parts(topology, trajectory)) == 1:  # the particles alone
        return trajectory.particles.x
    return jax.vmap(lambda s: scene_vertices(topology, params, s))(trajectory)


def scene_faces(topology) -> np.ndarray:
    """Faces [F, 3] int32 over `scene_vertices`: every drawn part's, offset by the vertices before it (host side).

    Args:
        topology: the scene's `Topology`.

    Returns:
        [F, 3] int32 faces over `scene_vertices`.
    """
    faces, offset = [], 0
    for part in MESH_PARTS:
        if part.drawn(topology):
            more, offset = part.faces(topology, offset)
            faces += more
    return np.concatenate(faces).astype(np.int32)


def face_ranges(topology) -> dict[str, tuple[int, int]]:
    """Where each part's faces lie in `scene_faces` (host side), so that colours can be given part by part.

    Args:
        topology: the scene's `Topology`.

    Returns:
        {part name (`MeshPart.name`): (its first face, the face after its last)}; a part not drawn has an empty
        range where it would be.
    """
    ranges, start = {}, 0
    for part in MESH_PARTS:
        count = sum(len(f) for f in part.faces(topology, 0)[0]) if part.drawn(topology) else 0
        ranges[part.name] = (start, start + count)
        start += count
    return ranges
