"""`Scene.build`'s stages: a host `Scene`'s arrays as the device containers (`scene_topology`, `scene_params`,
`scene_state`, `with_self_contact`), and when an element array gets a corner incidence table
(`incidence_table`, `INCIDENCE_MIN_CORNERS`)."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry.build_options import Contact, Environment
from gradsim_jax.geometry.contact_options import body_contact_flag, particle_contact_flag, smoothing_length
from gradsim_jax.physics import (
    ClothParams, ClothTopology, ContactParams, FemParams, FemTopology, Params, ParticleParams, ParticleState,
    ParticleTopology, SpringParams, SpringTopology, State, Topology, World,
)
from gradsim_jax.physics.collider_motion import key_arrays
from gradsim_jax.physics.colliders import ColliderParams, ColliderTopology, validate_colliders
from gradsim_jax.physics.gather import corner_incidence
from gradsim_jax.physics.rigid import RigidParams, RigidState, RigidTopology
from gradsim_jax.physics.selfcontact import SelfContactParams, SelfContactTopology, table_size
from gradsim_jax.physics.stencil import find_cloth_grid

if TYPE_CHECKING:
    from gradsim_jax.geometry.scene import Scene


#: `Scene.build(incidence=None)` gives an element array a corner incidence table from this many corners on
#: (elements x corners per element): 6144 springs, 3072 bending edges or tets.
INCIDENCE_MIN_CORNERS = 12288
#: The same for membrane triangles, whose corner-major kernel gains from the table much sooner: from 342
#: triangles (gradSim's 400-triangle demo cloth: forward 20 -> 11 ms, gradient 114 -> 70 ms for 960
#: steps; at 128 triangles even, at 18 the scatter-add is faster and compiles 0.6 s sooner).
TRIANGLE_INCIDENCE_MIN_CORNERS = 1024


def incidence_table(elements, width: int, n: int, incidence, min_corners: int = INCIDENCE_MIN_CORNERS):
    """The corner incidence table of an element array (`physics.gather`) where `Numerics.incidence` wants one
    (None: from `min_corners` corners on), or None; also None for an empty or out-of-range array.

    Args:
        elements: [k, width] particle indices of each element.
        width: corners per element.
        n: the number of particles.
        incidence: True, False or None (`Numerics.incidence`).
        min_corners: with `incidence` None, the least elements x corners that get a table.

    Returns:
        The table as a device array, or None.
    """
    # Checked against its elements by validate_scene; out-of-range elements fail there first.
    rows = np.asarray(elements, np.int64).reshape(-1, width)
    wanted = rows.size >= min_corners if incidence is None else bool(incidence)
    if not wanted or rows.size == 0 or rows.min() < 0 or rows.max() >= n:
        return None
    return jnp.asarray(corner_incidence(rows, n))


def scene_topology(scene: Scene, env: Environment, con: Contact, incidence, rigid_contact: str,
              aerodynamics: bool, membrane: bool = True, bending: str = "dihedral") -> Topology:
    """`Scene.build`'s stage one: the static structure (indices, flags, incidence tables, and a cloth's lattice
    where its triangles are a grid: `physics.stencil.find_cloth_grid`).

    Args:
        scene: the host `Scene`.
        env: its `Environment`.
        con: its `Contact` options.
        incidence: True, False or None (`Numerics.incidence`).
        rigid_contact: the bodies' contact model (`contact_options.rigid_contact_model`).
        aerodynamics: whether the cloth's drag and lift term is on.
        membrane: whether the cloth's membrane is on.
        bending: the cloth's bending model ("dihedral" or "angular").

    Returns:
        The `Topology`.
    """
    n = len(scene.x)
    table = functools.partial(incidence_table, n=n, incidence=incidence)
    return Topology(
        particles=ParticleTopology(pinned=jnp.asarray(scene.pinned, bool)),
        springs=SpringTopology(pairs=jnp.asarray(scene.springs, jnp.int32), incidence=table(scene.springs, 2)),
        cloth=ClothTopology(triangles=jnp.asarray(scene.triangles, jnp.int32),
                            bend_edges=jnp.asarray(scene.bend_edges, jnp.int32), aerodynamics=aerodynamics,
                            membrane=membrane, bending=bending,
                            tri_incidence=table(scene.triangles, 3, min_corners=TRIANGLE_INCIDENCE_MIN_CORNERS),
                            bend_incidence=table(scene.bend_edges, 4),
                            grid=find_cloth_grid(scene.triangles, scene.bend_edges, n)),
        rigid=RigidTopology(vertex_body=jnp.asarray(scene.vertex_body, jnp.int32),
                            push_body=jnp.asarray(scene.push_body, jnp.int32),
                            faces=jnp.asarray(scene.body_faces, jnp.int32).reshape(-1, 3),
                            contact=str(rigid_contact),
                            collide=body_contact_flag(con.body_contact, scene),
                            particles=particle_contact_flag(con.particle_body_contact, scene)),
        fem=FemTopology(tets=jnp.asarray(scene.tets, jnp.int32).reshape(-1, 4),
                        surface=jnp.asarray(scene.tet_surface, jnp.int32).reshape(-1, 3),
                        incidence=table(scene.tets, 4)),
        ground=bool(env.ground),
    )


def scene_params(scene: Scene, env: Environment, con: Contact, arr) -> Params:
    """`Scene.build`'s stage two: the float parameters, each array `arr`'s dtype.

    Args:
        scene: the host `Scene`.
        env: its `Environment`.
        con: its `Contact` options.
        arr: the conversion of a host value to a device array of the scene's dtype.

    Returns:
        The `Params`.
    """
    return Params(
        world=World(gravity=arr(env.gravity), ground_height=arr(env.ground_height),
                    ground_normal=arr(env.ground_normal), contact_smoothing=smoothing_length(con.smoothing)),
        particles=ParticleParams(mass=arr(scene.mass), damping=arr(env.damping), radius=arr(con.particle_radius)),
        springs=SpringParams(ke=arr(scene.spring_ke), kd=arr(scene.spring_kd), rest=arr(scene.spring_rest)),
        cloth=ClothParams(
            tri_ke=arr(scene.tri_ke), tri_ka=arr(scene.tri_ka), tri_kd=arr(scene.tri_kd),
            tri_activation=arr(np.zeros(len(scene.triangles))), tri_drag=arr(scene.tri_drag),
            tri_lift=arr(scene.tri_lift), rest_x=arr(scene.x),
            bend_ke=arr(scene.bend_ke), bend_kd=arr(scene.bend_kd), bend_rest=arr(scene.bend_rest)),
        contact=ContactParams(ke=arr(con.ke), kd=arr(con.kd), kf=arr(con.kf), mu=arr(con.mu)),
        rigid=RigidParams(
            mass=arr(scene.body_mass), gyration=arr(scene.body_gyration).reshape(-1, 3, 3),
            vertices=arr(scene.body_vertices).reshape(-1, 3), contact_ke=arr(scene.body_ke),
            contact_kd=arr(scene.body_kd), contact_kf=arr(scene.body_kf), contact_mu=arr(scene.body_mu),
            restitution=arr(scene.restitution), push_force=arr(scene.push_force).reshape(-1, 3),
            push_point=arr(scene.push_point).reshape(-1, 3), push_start=arr(scene.push_start),
            push_end=arr(scene.push_end)),
        fem=FemParams(k_mu=arr(scene.tet_k_mu), k_lambda=arr(scene.tet_k_lambda), k_damp=arr(scene.tet_k_damp),
                      activation=arr(np.zeros(len(scene.tets))), rest_x=arr(scene.x),
                      particle_volume=arr(scene.volume)),
    )


def scene_state(scene: Scene, arr) -> State:
    """`Scene.build`'s stage three: the initial state of the particles and the bodies.

    Args:
        scene: the host `Scene`.
        arr: the conversion of a host value to a device array of the scene's dtype.

    Returns:
        The `State`.
    """
    return State(particles=ParticleState(x=arr(scene.x), v=arr(scene.v)),
                 rigid=RigidState(x=arr(scene.body_x).reshape(-1, 3), q=arr(scene.body_q).reshape(-1, 4),
                                  v=arr(scene.body_v).reshape(-1, 3), w=arr(scene.body_w).reshape(-1, 3)))


def with_self_contact(topology: Topology, params: Params, con: Contact, n: int, arr) -> tuple[Topology, Params]:
    """`topology` and `params` with the self-contact branch of `n` particles (`physics.selfcontact`).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        con: its `Contact` options (self_capacity, particle_radius, self_ke, self_kd).
        n: the number of particles.
        arr: the conversion of a host value to a device array of the scene's dtype.

    Returns:
        (Topology, Params) with their self-contact branches.
    """
    topology = dataclasses.replace(topology, self_contact=SelfContactTopology(
        capacity=int(con.self_capacity), table=table_size(n)))
    params = dataclasses.replace(params, self_contact=SelfContactParams(
        thickness=arr(2.0 * con.particle_radius), ke=arr(con.self_ke), kd=arr(con.self_kd)))
    return topology, params


def with_colliders(topology, params, scene: "Scene", arr):
    """The scene's colliders added to the device trees (`physics.colliders`), checked.

    Args:
        topology: the scene's Topology so far.
        params: the scene's Params so far.
        scene: the scene (its `Collider` records, their motion and meshes).
        arr: the conversion of a numpy array to the built tree's arrays (dtype).

    Returns:
        (topology, params) with their `colliders` branches.
    """
    kinds = tuple(c.kind for c in scene.colliders)
    topology = dataclasses.replace(topology, colliders=ColliderTopology(kinds, tuple(scene.collider_meshes),
                                                                        tuple(scene.collider_segments)))
    params = dataclasses.replace(params, colliders=ColliderParams(**collider_arrays(scene, arr)))
    validate_colliders(topology.colliders, params.colliders)
    return topology, params


def collider_arrays(scene: "Scene", arr) -> dict:
    """The `ColliderParams` fields of a scene's colliders, stacked from its `Collider` records: position,
    rotation, size, ke, kd, kf, mu, and the keyframe fields when one moves (`physics.collider_motion.key_arrays`).

    Args:
        scene: the scene (its colliders, collider_motion).
        arr: the conversion of a numpy array to the built tree's arrays (dtype).

    Returns:
        {field: array} with a leading axis of one entry per collider.
    """
    values = [c.param_values() for c in scene.colliders]
    fields = {k: np.array([v[k] for v in values], np.float64) for k in values[0]}
    fields.update(key_arrays(fields["position"], fields["rotation"], scene.collider_motion))
    return {k: arr(v) for k, v in fields.items()}
