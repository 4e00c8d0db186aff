"""Host-side scene builders: cloth grids, triangle meshes, soft bodies (tet meshes), rigid bodies, loose
particles, springs, and their union.

A `Scene` is plain numpy data on the host. Pieces combine with `combine(a, b, ...)` (or `a + b`), which
offsets the indices of later pieces; `Scene.build(...)` turns the union into the three device containers
`(Topology, Params, State)` after validating it. Particle indices of a combined scene are those of the
pieces in order: a piece's particle k is `offset + k` where `offset` counts the particles before it.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics import Params, State, Topology
from gradsim_jax.geometry.rotations import quat_rotate
from gradsim_jax.geometry.build_options import BUILD_SHORTHANDS, Contact, Environment, Numerics
from gradsim_jax.geometry.contact_options import rigid_contact_model
from gradsim_jax.geometry.device_trees import (
    scene_params, scene_state, scene_topology, with_colliders, with_self_contact
)
from gradsim_jax.physics.ode import with_ode_body
from gradsim_jax.physics.smoke import with_smoke
from gradsim_jax.physics.validate import check_index_rows, validate_scene
from gradsim_jax.typing import grouped_options

# dflex/Warp's defaults for cloth materials.
DEFAULT_TRI_KE = 100.0
DEFAULT_TRI_KA = 100.0
DEFAULT_TRI_KD = 10.0
DEFAULT_BEND_KE = 100.0
DEFAULT_BEND_KD = 0.0
# Soft bodies (`soft_body`): a soft rubber (Young's modulus ~ 250 kPa, Poisson ratio 0.25) of water's
# density. Measured (semi-implicit Euler, a cube standing on its pinned base): a 1 m cube sags ~3 %, a
# 0.2 m one < 1 %; stable at dt = 1e-3 s for elements (cube cells) of 5 cm or more, 5e-4 s for 2 cm,
# 1e-4 s for 1 cm (wave speed sqrt((k_lambda + 2 k_mu) / rho) ~ 17 m/s). A k_mu of ~1e3 Pa would let a
# 1 m body of this density collapse under its own weight (rho g L ~ 1e4 Pa). k_damp = 10 Pa s damps the fine
# (element-scale) modes quickly and the body's wobble lightly; much more limits the step of small elements.
DEFAULT_DENSITY = 1000.0
DEFAULT_K_MU = 1.0e5
DEFAULT_K_LAMBDA = 1.0e5
DEFAULT_K_DAMP = 10.0


def as_floats(a, shape=None, name="value"):
    """float64 array of `a` (broadcast to `shape`); ValueError naming `name` when it is not real numbers or
    does not broadcast.

    Args:
        a: the numbers (array-like).
        shape: the shape to broadcast to; None: `a`'s own.
        name: what `a` is, for the message.

    Returns:
        A float64 array (a copy when broadcast).
    """
    if np.iscomplexobj(a):  # a cast would drop the imaginary part with only a warning
        raise ValueError(f"{name} must be real numbers, got complex values {_short(a)}")
    try:
        a = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be real numbers, got {_short(a)}") from None
    if shape is None:
        return a
    try:
        return np.broadcast_to(a, shape).copy()
    except ValueError:
        raise ValueError(f"{name} has shape {a.shape}, expected {shape} (or one that broadcasts to it)") from None


def as_indices(a, width, name="indices"):
    """int64 index rows [count, width] of `a` ([count, width], or flat with `width` per row); ValueError
    naming `name` for anything else (fractions, NaN, other row widths). Range checks are the caller's.

    Args:
        a: the indices (array-like, integers or whole numbers written as floats).
        width: indices per row.
        name: what `a` is, for the message.

    Returns:
        [count, width] int64.
    """
    arr = np.asarray(a)
    if arr.size == 0:
        return np.zeros((0, width), np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        arr = arr.astype(np.int64)
    elif np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)  # whole numbers written as floats
    else:
        raise ValueError(f"{name} must be integer indices, got {_short(a)}")
    if not (arr.ndim == 2 and arr.shape[1] == width) and not (arr.ndim == 1 and arr.size % width == 0):
        raise ValueError(f"{name} must be [count, {width}] (or flat, {width} per row), got shape {arr.shape}")
    return arr.reshape(-1, width)


def require_finite(name, a):
    """ValueError naming the first non-finite entry of `a`: "vertices[3, 1] = nan is not finite".

    Args:
        name: what `a` is, for the message.
        a: the numbers (numpy array).
    """
    bad = ~np.isfinite(a)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name}{list(at)} = {a[at]} is not finite")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclasses.dataclass(frozen=True)
class Scene:
    """A particle scene on the host (numpy). Build the device containers with `build`.

    Per particle: x [n, 3] m, v [n, 3] m/s, mass [n] kg, pinned [n] bool, volume [n] m^3 (the volume a soft
    body's particle's mass stands for, mass = density x volume; 0 for other particles: `FemParams.particle_volume`).
    Springs [s, 2] with ke, kd, rest; triangles [t, 3] with tri_ke, tri_ka, tri_kd, tri_drag, tri_lift;
    bending edges [e, 4] with bend_ke, bend_kd, bend_rest (rad); tetrahedra [k, 4] with tet_k_mu, tet_k_lambda
    (Pa), tet_k_damp (Pa s) and their boundary triangles tet_surface [f, 3] (rendering).
    """

    x: np.ndarray
    v: np.ndarray
    mass: np.ndarray
    pinned: np.ndarray
    volume: np.ndarray = None  # type: ignore[assignment]  (None: zeros, set in __post_init__)
    springs: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 2), np.int32))
    spring_ke: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    spring_kd: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    spring_rest: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    triangles: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3), np.int32))
    tri_ke: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tri_ka: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tri_kd: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tri_drag: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tri_lift: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    bend_edges: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 4), np.int32))
    bend_ke: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    bend_kd: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    bend_rest: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tets: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 4), np.int32))
    tet_k_mu: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tet_k_lambda: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tet_k_damp: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    tet_surface: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3), np.int32))
    # Rigid bodies [b], their hull vertices [m] (body frame, relative to the COM) and faces, and pushes [k].
    body_x: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    body_q: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 4)))
    body_v: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    body_w: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    body_mass: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    body_gyration: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3, 3)))
    body_ke: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    body_kd: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    body_kf: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    body_mu: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    restitution: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    body_vertices: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    vertex_body: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int32))
    body_faces: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3), np.int32))
    push_body: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int32))
    push_force: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    push_point: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    push_start: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    push_end: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    # An ODE body (`physics.ode`; `geometry.ode` builds them): (system, params, y), host values; None: none.
    ode: tuple | None = None
    # Smoke on a grid (`physics.smoke`; `geometry.smoke` builds it): (SmokeTopology, SmokeParams, SmokeState);
    # None: none.
    smoke: tuple | None = None
    # Static colliders (`physics.colliders`; `geometry.colliders.collider` builds one): a `Collider` record each
    # (kind, position [3] m, rotation [4] w x y z, size [3] m, ke, kd, kf, mu).
    colliders: tuple = ()
    # Their motion, one entry per collider: None (static) or `Keyframes` (times [K], positions [K, 3], rotations
    # [K, 4]) (`physics.collider_motion`).
    collider_motion: tuple = ()
    # Their triangle meshes, one entry per collider: a `StaticMesh` for a "mesh" collider, None for the others.
    collider_meshes: tuple = ()
    # Their tessellation, one entry per collider: a sphere's UV (segments, rings), or None (an icosphere; the
    # other kinds).
    collider_segments: tuple = ()

    def __post_init__(self):
        if self.volume is None:
            object.__setattr__(self, "volume", np.zeros(self.x.shape[0]))

    @property
    def num_particles(self) -> int:
        return self.x.shape[0]

    @property
    def num_bodies(self) -> int:
        return self.body_mass.shape[0]

    def add_push(self, body: int, force, *, point=(0.0, 0.0, 0.0), start: float = 0.0,
                 end: float = np.inf) -> "Scene":
        """A known force `force` [3] N (world frame) on rigid body `body` at `point` [3] m (body frame,
        relative to its centre of mass) while start <= t < end (s): gradSim's pushes.

        Args:
            body: the rigid body's index.
            force: [3] N, world frame.
            point: [3] m, where it acts (body frame, relative to the centre of mass).
            start: s, when it starts.
            end: s, when it ends (exclusive).

        Returns:
            The scene with the push added.
        """
        if not 0 <= int(body) < self.num_bodies:
            raise ValueError(f"add_push: body {body} out of range [0, {self.num_bodies})")
        force, point = as_floats(force, (3,), "force"), as_floats(point, (3,), "point")
        require_finite("force", force)
        require_finite("point", point)
        if not float(start) < float(end):
            raise ValueError(f"add_push: start ({start} s) must come before end ({end} s)")
        return dataclasses.replace(
            self, push_body=np.append(self.push_body, int(body)).astype(np.int32),
            push_force=np.concatenate([self.push_force, force[None]]),
            push_point=np.concatenate([self.push_point, point[None]]),
            push_start=np.append(self.push_start, float(start)), push_end=np.append(self.push_end, float(end)))

    def __add__(self, other: "Scene") -> "Scene":
        return combine(self, other)

    def add_springs(self, pairs, ke, kd=0.0, rest=None) -> "Scene":
        """Add springs between particles of this scene (indices [s, 2]); rest defaults to current length.

        Args:
            pairs: [s, 2] particle indices of each spring.
            ke: N/m, stiffness (scalar or [s]).
            kd: N s/m, damping (scalar or [s]).
            rest: m, rest lengths (scalar or [s]); None: the current lengths.

        Returns:
            The scene with the springs added.
        """
        pairs = as_indices(pairs, 2, "springs")
        s = pairs.shape[0]
        check_index_rows("springs", pairs, self.num_particles)
        pairs = pairs.astype(np.int32)
        if rest is None:
            rest = np.linalg.norm(self.x[pairs[:, 0]] - self.x[pairs[:, 1]], axis=1)
        return dataclasses.replace(
            self,
            springs=np.concatenate([self.springs, pairs]),
            spring_ke=np.concatenate([self.spring_ke, as_floats(ke, (s,), "ke")]),
            spring_kd=np.concatenate([self.spring_kd, as_floats(kd, (s,), "kd")]),
            spring_rest=np.concatenate([self.spring_rest, as_floats(rest, (s,), "rest")]),
        )

    def build(self, *, environment: Optional[Environment] = None, contact: Optional[Contact] = None,
              numerics: Optional[Numerics] = None, **flat) -> tuple[Topology, Params, State]:
        """Validate and convert to device containers `(Topology, Params, State)`.

        The options come in three frozen records (`geometry.build_options`), or as their fields under flat
        keyword names (`BUILD_SHORTHANDS`): `build(ground=True, contact_ke=1e3)` is
        `build(environment=Environment(ground=True), contact=Contact(ke=1e3))`.

        `aerodynamics` switches the drag and lift term on (default: on when any tri_drag or tri_lift is
        nonzero; pass True to fit them from zero). `dtype` defaults to JAX's default float (float32, or
        float64 with x64 enabled). Ground contact (`ground=True`): particles rest at ground_height +
        `particle_radius` (m) along `ground_normal`; one placed lower starts compressed and is thrown out
        (`gradsim_jax.physics.contact_report` says by how much before a run). The default contact_ke / kd
        suit particles of 0.1 kg or more at 1 ms steps; lighter ones need smaller values or steps.
        `ground` governs the ground of every component: with it, rigid bodies meet it through `rigid_contact`,
        "penalty" (the default: each body's contact_ke, kd, kf, mu at its hull vertices) or "impulse"
        (restitution); without it they fall through. `body_contact`: the bodies meet each other (penalty, each
        pair's mean contact coefficients; `physics.bodycontact`): True needs closed convex hulls (ValueError
        naming the body otherwise); None (default) is on for two or more bodies whose hulls all are, and off
        with a warning naming the body that is not. Bodies always meet the scene's colliders.
        `particle_body_contact`: the particles (cloth, soft bodies) meet the bodies, both ways (penalty, the mean
        of `contact_*` and the body's; `physics.particle_body`): True needs closed convex hulls; None (default)
        is on for a scene with particles and bodies whose hulls all are. `contact_smoothing` (m): every penalty
        contact (ground, colliders, bodies) starts smoothly over about this distance instead of with a kink
        (`physics.contact.contact_depth`; 0, the default, is the exact penalty). `self_contact`: the particles
        push each other apart closer than two particle radii (a cloth folding onto itself;
        `physics.selfcontact`: ke, kd, and at most `self_contact_capacity` particles per grid cell;
        `self_contact_overflow` tells when a cell holds more).
        A `rigid_contact` that contradicts `ground` ("penalty" or "impulse" without a ground, "none" with one
        in a scene with bodies) is a ValueError.
        `incidence`: give each element array (springs, triangles, bending edges, tets) its corner incidence
        table, so that its forces are summed by gathers instead of a scatter-add (`physics.gather`): True,
        False, or None (default) for arrays of at least `INCIDENCE_MIN_CORNERS` corners
        (`TRIANGLE_INCIDENCE_MIN_CORNERS` for triangles), where the faster steps repay the longer compile (a
        16-triangle cloth's gradient compiles in 4.6 s instead of 3.5 s for no gain).

        Args:
            environment: gravity, damping, aerodynamics and the ground (`Environment`; None: its defaults and
                the flat keywords).
            contact: the particles' penalty coefficients, which components meet, self-contact (`Contact`; None:
                its defaults and the flat keywords).
            numerics: dtype and incidence tables (`Numerics`; None: its defaults and the flat keywords).
            **flat: the records' fields by flat name (`BUILD_SHORTHANDS`): gravity [3] m/s^2, damping 1/s,
                aerodynamics, ground, ground_height m, ground_normal [3]; contact_ke N/m, contact_kd N s/m,
                contact_kf N s/m, contact_mu, particle_radius m, contact_smoothing m, rigid_contact,
                body_contact, particle_body_contact, self_contact, self_contact_ke N/m, self_contact_kd N s/m,
                self_contact_capacity; incidence, dtype. TypeError for another name, or for one given together
                with its record.

        Returns:
            (Topology, Params, State), the device containers of the scene.
        """
        options = grouped_options("Scene.build", {"environment": (Environment(), environment),
                                                  "contact": (Contact(), contact), "numerics": (Numerics(), numerics)},
                                  flat, BUILD_SHORTHANDS)
        env, con, num = options["environment"], options["contact"], options["numerics"]
        rigid_contact = rigid_contact_model(con.rigid_model, bool(env.ground), self.num_bodies)
        aerodynamics = env.aerodynamics
        if aerodynamics is None:
            aerodynamics = bool(np.any(self.tri_drag) or np.any(self.tri_lift))
        membrane = env.membrane
        if membrane is None:
            membrane = not (len(self.triangles) and not (np.any(self.tri_ke) or np.any(self.tri_ka)
                                                          or np.any(self.tri_kd)))
        dtype = num.dtype or jnp.zeros(()).dtype
        arr = lambda a: jnp.asarray(a, dtype=dtype)  # noqa: E731
        if env.bending not in ("dihedral", "angular"):
            raise ValueError(f'bending must be "dihedral" or "angular", got {env.bending!r}')
        topology = scene_topology(self, env, con, num.incidence, rigid_contact, bool(aerodynamics), bool(membrane),
                                  env.bending)
        params = scene_params(self, env, con, arr)
        state = scene_state(self, arr)
        if con.self_contact:
            topology, params = with_self_contact(topology, params, con, len(self.x), arr)
        if self.ode is not None:
            topology, params, state = with_ode_body(topology, params, state, *self.ode, arr)
        if self.smoke is not None:
            topology, params, state = with_smoke(topology, params, state, *self.smoke)
        if self.colliders:
            topology, params = with_colliders(topology, params, self, arr)
        validate_scene(topology, params, state)
        return topology, params, state


def particles(x, v=0.0, mass=1.0, pinned=False) -> Scene:
    """Loose particles as a `Scene`: positions x [n, 3] m, velocities v (scalar or [n, 3]) m/s, masses (scalar or
    [n]) kg (0 = fixed), pinned flags (bool or [n]).

    Args:
        x: [n, 3] m, positions.
        v: m/s, velocities (scalar or [n, 3]).
        mass: kg, masses (scalar or [n]; 0 = fixed).
        pinned: pinned flags (bool or [n]).

    Returns:
        The particles as a `Scene`.
    """
    x = as_points(x, "x")
    n = x.shape[0]
    mass = as_floats(mass, (n,), "mass")
    try:
        pinned = np.broadcast_to(np.asarray(pinned, bool), (n,))
    except (TypeError, ValueError):
        raise ValueError(f"pinned must be one flag or [{n}] flags, got {_short(pinned)}") from None
    return Scene(x=x, v=as_floats(v, (n, 3), "v"), mass=mass, pinned=pinned | (mass == 0.0))


def as_points(a, name) -> np.ndarray:
    """Points [n, 3] from [n, 3] or a flat list of 3 n numbers; ValueError naming `name` otherwise.

    Args:
        a: the points' coordinates (array-like).
        name: what `a` is, for the message.

    Returns:
        [n, 3] float64.
    """
    a = as_floats(a, name=name)
    if not (a.ndim == 2 and a.shape[1] == 3) and not (a.ndim == 1 and a.size % 3 == 0):
        raise ValueError(f"{name} must be [n, 3] (or flat, 3 per point), got shape {a.shape}")
    return a.reshape(-1, 3)


def combine(*pieces: Scene) -> Scene:
    """Union of host-side scenes (cloth, soft bodies, particles, rigid bodies) in one `Scene`: particles
    [sum n] in the order given, indices of each piece offset by the particles of the pieces before it, bodies
    appended in order.

    Args:
        *pieces: the `Scene` pieces (or one iterable of them).

    Returns:
        The union as one `Scene`.
    """
    if len(pieces) == 1 and not isinstance(pieces[0], Scene):
        pieces = tuple(pieces[0])
    cat = lambda name: np.concatenate([getattr(p, name) for p in pieces])  # noqa: E731

    def shifted(name, count):
        offsets = np.cumsum([0] + [count(p) for p in pieces])[:-1]
        return np.concatenate([getattr(p, name) + o for p, o in zip(pieces, offsets)]).astype(np.int32)

    if not pieces:
        raise ValueError("combine needs at least one Scene piece")
    fields = {f.name: cat(f.name) for f in dataclasses.fields(Scene)
              if f.name not in ("ode", "smoke", "colliders", "collider_motion", "collider_meshes",
                                "collider_segments")}
    fields["colliders"] = sum((tuple(p.colliders) for p in pieces), ())
    for name in ("collider_motion", "collider_meshes", "collider_segments"):  # one entry per collider (None: none)
        fields[name] = sum((tuple(getattr(p, name)) or (None,) * len(p.colliders) for p in pieces), ())
    for name, what in (("ode", "ODE body (physics.ode)"), ("smoke", "smoke grid (physics.smoke)")):
        given = [getattr(p, name) for p in pieces if getattr(p, name) is not None]
        if len(given) > 1:
            raise ValueError(f"a scene holds one {what}, got {len(given)}: build them as one piece")
        fields[name] = given[0] if given else None
    for name in ("springs", "triangles", "bend_edges", "tets", "tet_surface"):
        fields[name] = shifted(name, lambda p: p.num_particles)
    for name in ("vertex_body", "push_body"):
        fields[name] = shifted(name, lambda p: p.num_bodies)
    fields["body_faces"] = shifted("body_faces", lambda p: p.body_vertices.shape[0])
    return Scene(**fields)


def rigid_body(
    vertices,
    faces,
    *,
    density: float | None = None,
    mass: float | None = None,
    pos=(0.0, 0.0, 0.0),
    rot=(1.0, 0.0, 0.0, 0.0),
    vel=(0.0, 0.0, 0.0),
    omega=(0.0, 0.0, 0.0),
    contact_ke: float = 1.0e4,
    contact_kd: float = 100.0,
    contact_kf: float = 100.0,
    contact_mu: float = 0.5,
    restitution: float = 0.5,
    name: str = "mesh",
) -> Scene:
    """A rigid body from a closed triangle mesh (`geometry.rigid`: box_mesh, sphere_mesh, load_mesh, ...).

    Mass, centre of mass and inertia are the mesh's exact ones for a uniform `density` (kg/m^3) or total
    `mass` (kg) (`mass_properties`); an open or inconsistently oriented mesh is refused (`MeshError`).
    The body's centre of mass starts at rot * (com - 0) + pos, i.e. the mesh is placed as given, rotated
    by `rot` (unit quaternion w, x, y, z) about its own origin and moved by `pos`; `vel` [3] m/s and `omega`
    [3] rad/s (world frame) are its initial velocities. contact_*: penalty ground contact (N/m, N s/m,
    N s/m, 1); `restitution`: the impulse model's coefficient (`Scene.build(rigid_contact=...)`).

    Args:
        vertices: [m, 3] m, the mesh's vertices.
        faces: [f, 3] the mesh's triangles (vertex indices).
        density: kg/m^3, uniform density (or give `mass`).
        mass: kg, total mass (or give `density`).
        pos: [3] m, where the mesh is moved.
        rot: [4] unit quaternion (w, x, y, z) it is rotated by.
        vel: [3] m/s, initial velocity.
        omega: [3] rad/s, initial angular velocity (world frame).
        contact_ke: N/m, penalty ground contact stiffness.
        contact_kd: N s/m, its damping.
        contact_kf: N s/m, its friction's viscous slope.
        contact_mu: 1, its Coulomb coefficient.
        restitution: in [0, 1], the impulse model's coefficient.
        name: the mesh's name, for messages.

    Returns:
        The body as a `Scene`.
    """
    from gradsim_jax.geometry.rigid import rigid_body_from_mesh

    shape = rigid_body_from_mesh(vertices, faces, density=density, mass=mass, name=name)
    rot = as_floats(rot, (4,), "rot")
    if not (np.all(np.isfinite(rot)) and np.linalg.norm(rot) > 0):
        raise ValueError(f"rigid_body needs rot = a nonzero finite quaternion (w, x, y, z), got {rot.tolist()}")
    rot = rot / np.linalg.norm(rot)
    values = {}
    for key, value, shape_ in (("pos", pos, (3,)), ("vel", vel, (3,)), ("omega", omega, (3,))):
        values[key] = as_floats(value, shape_, key)
        require_finite(key, values[key])
    material = {}
    for key, value in (("contact_ke", contact_ke), ("contact_kd", contact_kd), ("contact_kf", contact_kf),
                       ("contact_mu", contact_mu), ("restitution", restitution)):
        value = float(as_floats(value, (), key))
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"rigid_body needs a finite {key} >= 0, got {value}")
        material[key] = np.array([value])
    if material["restitution"][0] > 1:
        raise ValueError(f"rigid_body needs restitution in [0, 1], got {restitution}")
    m = shape.vertices_body.shape[0]
    empty = particles(np.zeros((0, 3)))
    return dataclasses.replace(
        empty, body_x=(quat_rotate(rot, shape.com) + values["pos"])[None], body_q=rot[None],
        body_v=values["vel"][None], body_w=values["omega"][None], body_mass=np.array([float(shape.mass)]),
        body_gyration=np.asarray(shape.gyration)[None], body_ke=material["contact_ke"],
        body_kd=material["contact_kd"], body_kf=material["contact_kf"], body_mu=material["contact_mu"],
        restitution=material["restitution"], body_vertices=np.asarray(shape.vertices_body),
        vertex_body=np.zeros(m, np.int32), body_faces=np.asarray(shape.faces, np.int32))


def pinned_mask(pinned, n: int) -> np.ndarray:
    """[n] bool from None (nothing pinned), an [n] bool mask or a list of vertex indices.

    Args:
        pinned: None, an [n] bool mask, or vertex indices.
        n: the number of vertices.

    Returns:
        [n] bool.
    """
    mask = np.zeros(n, bool)
    if pinned is not None:
        pinned = np.asarray(pinned)
        if pinned.dtype == bool:
            if pinned.size != n:
                raise ValueError(f"pinned as a mask must have one flag per vertex ({n}), got shape {pinned.shape}")
            mask = pinned.reshape(n).copy()
        else:
            rows = as_indices(pinned, 1, "pinned")
            check_index_rows("pinned", rows, n)
            mask[rows[:, 0]] = True
    return mask
