"""Input checks that run on the host before anything is traced or compiled.

Every error is a `ValueError` naming the container field and the offending index. Shapes and dtypes are
static and checked always; values only when concrete (inside `jit`, `grad` or `vmap` they are tracers:
`gradsim_jax.physics.checks` checks them there, through checkify).
"""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.gather import incidence_mismatch
from gradsim_jax.physics.rigid import CONTACT_MODELS, RigidParams, RigidState, RigidTopology
from gradsim_jax.physics.stencil import grid_mismatch
from gradsim_jax.typing import get_path, is_concrete, named_leaves  # noqa: F401 (is_concrete re-exported)

#: Params leaves (dotted paths) that must be >= 0.
NONNEGATIVE = (
    "particles.mass", "particles.damping", "particles.radius", "springs.ke", "springs.kd", "springs.rest",
    "cloth.tri_ke", "cloth.tri_ka", "cloth.tri_kd", "cloth.tri_drag", "cloth.tri_lift", "cloth.bend_ke",
    "cloth.bend_kd", "contact.ke", "contact.kd", "contact.kf", "contact.mu", "rigid.mass", "rigid.contact_ke",
    "rigid.contact_kd", "rigid.contact_kf", "rigid.contact_mu", "rigid.restitution", "fem.k_mu", "fem.k_lambda",
    "fem.k_damp", "fem.particle_volume",
)


def _first_index(mask) -> str:
    idx = np.argwhere(mask)[0]
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def _expect_shape(name, value, shape):
    actual = np.shape(value)
    if actual != shape:
        raise ValueError(f"{name} has shape {actual}, expected {shape}")


#: Params leaves that may be +inf (a push that lasts for ever).
MAY_BE_INFINITE = ("rigid.push_end",)


def finite_view(name: str, value):
    """`value` with +inf read as 0 where the leaf `name` may be +inf (`MAY_BE_INFINITE`): what must be finite.
    numpy in (host checks), numpy out; a JAX array (traced checks) gives a JAX array.

    Args:
        name: the leaf's dotted path in Params ("rigid.push_end").
        value: the leaf's value, a numpy or JAX array.

    Returns:
        `value`, or a copy with +inf replaced by 0 when `name` is in `MAY_BE_INFINITE`.
    """
    if name in MAY_BE_INFINITE:
        xp = np if isinstance(value, np.ndarray) else jnp
        return xp.where(xp.isposinf(value), 0.0, value)
    return value


#: Index arrays of a Topology (dotted paths), their widths, and the letter their count goes by in PARAM_SHAPES.
INDEX_WIDTHS = {"springs.pairs": 2, "cloth.triangles": 3, "cloth.bend_edges": 4, "fem.tets": 4, "fem.surface": 3}
#: The corner incidence table of each element array (`gather.corner_incidence`; None when absent).
INCIDENCE = {"springs.incidence": "springs.pairs", "cloth.tri_incidence": "cloth.triangles",
             "cloth.bend_incidence": "cloth.bend_edges", "fem.incidence": "fem.tets"}
_COUNT = {"springs.pairs": "s", "cloth.triangles": "t", "cloth.bend_edges": "e", "fem.tets": "k",
          "fem.surface": "f"}

#: Shape of every Params leaf, in the counts n (particles), s (springs), t (triangles), e (bending edges),
#: k (tetrahedra).
PARAM_SHAPES = {
    "world.gravity": (3,), "world.ground_height": (), "world.ground_normal": (3,),
    "particles.mass": ("n",), "particles.damping": (), "particles.radius": (),
    "springs.ke": ("s",), "springs.kd": ("s",), "springs.rest": ("s",),
    "cloth.tri_ke": ("t",), "cloth.tri_ka": ("t",), "cloth.tri_kd": ("t",), "cloth.tri_activation": ("t",),
    "cloth.tri_drag": ("t",), "cloth.tri_lift": ("t",), "cloth.rest_x": ("n", 3), "cloth.bend_ke": ("e",),
    "cloth.bend_kd": ("e",), "cloth.bend_rest": ("e",),
    "contact.ke": (), "contact.kd": (), "contact.kf": (), "contact.mu": (),
    "fem.k_mu": ("k",), "fem.k_lambda": ("k",), "fem.k_damp": ("k",), "fem.activation": ("k",),
    "fem.rest_x": ("n", 3), "fem.particle_volume": ("n",),
}


def params_leaves(params) -> dict:
    """{dotted path: value} of the Params leaves.

    Args:
        params: the scene's Params.

    Returns:
        {dotted path without "Params." ("cloth.tri_ke"): leaf value}.
    """
    return {name[len("Params."):]: value for name, value in named_leaves(params, "Params")}


def validate_shapes(topology, params, state=None) -> dict:
    """Raise ValueError for mismatched shapes or non-integer indices; works on traced values too (shapes
    and dtypes are static). Returns the counts {"n", "s", "t", "e", "k", "f"}.

    Args:
        topology: the scene's Topology.
        params: the scene's Params.
        state: the scene's State whose shapes are checked as well, or None.

    Returns:
        {"n": particles, "s": springs, "t": triangles, "e": bending edges, "k": tets, "f": surface faces}.
    """
    pinned = topology.particles.pinned
    if len(np.shape(pinned)) != 1:
        raise ValueError(f"Topology.particles.pinned has shape {np.shape(pinned)}, expected [n] (one flag per "
                         "particle)")
    n = np.shape(pinned)[0]
    per = {"n": n}
    for name, width in INDEX_WIDTHS.items():
        idx = get_path(topology, name)
        shape, dtype = np.shape(idx), jnp.result_type(idx)
        if len(shape) != 2 or shape[1] != width:
            raise ValueError(f"Topology.{name} has shape {shape}, expected [count, {width}]")
        if shape[0] and not np.issubdtype(dtype, np.integer):
            raise ValueError(f"Topology.{name} must hold integer indices, got dtype {dtype}")
        per[_COUNT[name]] = shape[0]
    for name in INCIDENCE:
        table = get_path(topology, name)
        if table is None:
            continue
        shape, dtype = np.shape(table), jnp.result_type(table)
        if len(shape) != 2 or shape[1] != n or not np.issubdtype(dtype, np.integer):
            raise ValueError(f"Topology.{name} has shape {shape} and dtype {dtype}, expected integer [K, {n}] "
                             "(gradsim_jax.physics.gather.corner_incidence)")
    for name, value in params_leaves(params).items():
        if name in PARAM_SHAPES:  # the rigid branch: validate_rigid
            shape = tuple(per.get(d, d) for d in PARAM_SHAPES[name])
            _expect_shape(f"Params.{name}", value, shape)
    if state is not None:
        for name in ("x", "v"):
            _expect_shape(f"State.particles.{name}", getattr(state.particles, name), (n, 3))
    validate_rigid(topology.rigid, params.rigid, None if state is None else state.rigid)
    return per


def check_index_rows(name: str, rows, count: int) -> None:
    """Host side: ValueError naming the first row of `rows` [k, w] with an index outside [0, count),
    as "NAME[k] = [a, b, c] has an index out of range [0, count)" (`checks.check_indices` is the traced
    twin, with the same words).

    Args:
        name: the field's name in the message ("Topology.cloth.triangles").
        rows: [k, w] int, index rows (concrete).
        count: the exclusive upper bound of the indices.
    """
    rows = np.asarray(rows)
    bad = np.any((rows < 0) | (rows >= count), axis=-1) if rows.size else np.zeros(0, bool)
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(f"{name}[{k}] = {rows[k].tolist()} has an index out of range [0, {count})")


def validate_scene(topology, params, state=None) -> None:
    """Raise ValueError for malformed or unphysical scenes. On traced inputs only shapes and dtypes are
    checked (see `gradsim_jax.physics.checks` for checks of traced values).

    Args:
        topology: the scene's Topology.
        params: the scene's Params.
        state: the scene's State to check as well, or None.
    """
    validate_shapes(topology, params, state)
    if not is_concrete(topology, params, state):
        return
    n = np.shape(topology.particles.pinned)[0]
    sizes = {}
    for name, width in INDEX_WIDTHS.items():
        idx = np.asarray(get_path(topology, name))
        check_index_rows(f"Topology.{name}", idx, n)
        for a in range(width):
            for b in range(a + 1, width):
                same = idx[:, a] == idx[:, b]
                if same.any():
                    k = int(np.argmax(same))
                    raise ValueError(f"Topology.{name}[{k}] = {idx[k].tolist()} repeats a particle (degenerate)")
        sizes[name] = idx.shape[0]

    for name, value in params_leaves(params).items():
        value = finite_view(name, np.asarray(value))
        finite = np.isfinite(value)
        if not finite.all():
            raise ValueError(f"Params.{name}{_first_index(~finite)} is not finite")
        if name in NONNEGATIVE and (value < 0).any():
            at = _first_index(value < 0)
            raise ValueError(f"Params.{name}{at} is negative ({value[tuple(np.argwhere(value < 0)[0])]})")
    if np.linalg.norm(np.asarray(params.world.ground_normal)) == 0.0:
        raise ValueError("Params.world.ground_normal is the zero vector")

    if sizes["cloth.triangles"]:
        rest = np.asarray(params.cloth.rest_x, dtype=np.float64)
        tri = np.asarray(topology.cloth.triangles)
        e1, e2 = rest[tri[:, 1]] - rest[tri[:, 0]], rest[tri[:, 2]] - rest[tri[:, 0]]
        area = 0.5 * np.linalg.norm(np.cross(e1, e2), axis=1)
        scale = np.maximum(np.sum(e1 * e1, 1), np.sum(e2 * e2, 1))
        bad = area <= 1e-6 * scale
        if bad.any():
            k = int(np.argmax(bad))
            raise ValueError(f"Topology.cloth.triangles[{k}] = {tri[k].tolist()} has a degenerate rest shape "
                             f"(rest area {area[k]:.3g} m^2 in Params.cloth.rest_x)")

    if sizes["fem.tets"]:
        _check_rest_tets(np.asarray(topology.fem.tets), np.asarray(params.fem.rest_x, dtype=np.float64))

    # After the elements' own checks, so that a bad element is named as such.
    for name, elements in INCIDENCE.items():
        table = get_path(topology, name)
        if table is not None:
            why = incidence_mismatch(np.asarray(get_path(topology, elements)), np.asarray(table), n)
            if why is not None:
                raise ValueError(f"Topology.{name} does not match Topology.{elements}: it {why} (a table made for "
                                 "other elements: build it again with corner_incidence, or set it to None)")
    if topology.cloth.grid is not None:
        why = grid_mismatch(topology.cloth.grid, np.asarray(topology.cloth.triangles),
                            np.asarray(topology.cloth.bend_edges), n)
        if why is not None:
            raise ValueError(f"Topology.cloth.grid does not match the cloth's elements: it {why} (a grid made for "
                             "other elements: find it again with physics.stencil.find_cloth_grid, or set it to None)")

    if state is not None:
        for name, value in named_leaves(state, "State"):
            value = np.asarray(value)
            finite = np.isfinite(value)
            if not finite.all():
                raise ValueError(f"{name}{_first_index(~finite)} is not finite")


def rest_tet_volumes(rest, tets):
    """(signed volumes [k] m^3, degenerate [k] bool) of tets over positions `rest` [n, 3] (host, numpy):
    det[b - a, c - a, d - a] / 6, and |V0| <= 1e-12 (mean edge length)^3 (the one criterion for the builders
    and for `validate_scene`).

    Args:
        rest: [n, 3] m, rest positions.
        tets: [k, 4] int, particle indices (a, b, c, d) of each tet.

    Returns:
        (volume [k] m^3 float64; degenerate [k] bool).
    """
    x, t = np.asarray(rest, np.float64), np.asarray(tets)
    a, b, c, d = (x[t[:, i]] for i in range(4))
    volume = np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a)) / 6.0
    edges = x[t[:, [1, 2, 3, 2, 3, 3]]] - x[t[:, [0, 0, 0, 1, 1, 2]]]
    scale = np.mean(np.linalg.norm(edges, axis=-1), axis=1) ** 3
    return volume, np.abs(volume) <= 1e-12 * scale


def _check_rest_tets(tets, rest) -> None:
    """ValueError naming the first tet that is inverted or degenerate in its rest shape (PHYSICS.md: an
    input error; `gradsim_jax.geometry.tets.orient_tets` fixes the orientation of a mesh)."""
    volume, degenerate = rest_tet_volumes(rest, tets)
    bad = degenerate | (volume < 0)
    if bad.any():
        k = int(np.argmax(bad))
        what = "has a degenerate rest shape" if degenerate[k] else "is inverted"
        raise ValueError(f"Topology.fem.tets[{k}] = {tets[k].tolist()} {what} (rest volume {volume[k]:.3g} m^3 "
                         "in Params.fem.rest_x; tets must be positively oriented)")


def validate_dt(dt, name: str = "dt") -> None:
    """Raise ValueError unless the (concrete) time step is > 0.

    Args:
        dt: s, the time step (a traced one is not checked).
        name: the step's name in the message.
    """
    if is_concrete(dt) and not float(np.asarray(dt)) > 0.0:
        raise ValueError(f"{name} must be > 0, got {dt!r}")


# The rigid branch (physics/rigid.py)


def _fail(message: str):  # the rigid branch's checks below
    raise ValueError(message)


def _check_shape(name: str, value, shape) -> None:
    actual = tuple(np.shape(value))
    if actual != tuple(shape):
        _fail(f"{name} has shape {actual}, expected {tuple(shape)}")


def _check_finite(name: str, value) -> None:
    value = np.asarray(value, dtype=np.float64)
    bad = ~np.isfinite(value)
    if bad.any():
        at = ", ".join(str(int(i)) for i in np.argwhere(bad)[0])
        _fail(f"{name}[{at}] is not finite")


def _check_indices(name: str, index, count: int, what: str) -> None:
    index = np.asarray(index)
    bad = (index < 0) | (index >= count)
    if bad.any():
        k = int(np.argmax(bad))
        _fail(f"{name}[{k}] = {int(index[k])} is out of range [0, {count}) ({count} {what})")


def validate_rigid(topology: RigidTopology, params: RigidParams, state: Optional[RigidState] = None) -> None:
    """Host-side checks of a rigid component; raise ValueError (TypeError for a non-string contact model)
    naming the field and index. Shapes and dtypes always; values only for concrete (untraced) inputs.

    Args:
        topology: the bodies' RigidTopology.
        params: the bodies' RigidParams.
        state: the bodies' RigidState to check as well, or None.
    """
    if not isinstance(topology.contact, str):
        raise TypeError(f"RigidTopology.contact must be a str, one of {CONTACT_MODELS}, "
                        f"got {type(topology.contact).__name__}")
    if topology.contact not in CONTACT_MODELS:
        _fail(f"RigidTopology.contact is {topology.contact!r}, expected one of {CONTACT_MODELS}")
    if len(np.shape(params.mass)) != 1:
        _fail(f"Params.rigid.mass has shape {tuple(np.shape(params.mass))}, expected [b] (one mass per body)")
    b = int(np.shape(params.mass)[0])
    for name in ("vertex_body", "push_body"):
        index = getattr(topology, name)
        if len(np.shape(index)) != 1:
            _fail(f"RigidTopology.{name} has shape {tuple(np.shape(index))}, expected [count]")
        if np.shape(index)[0] and not np.issubdtype(jnp.result_type(index), np.integer):
            _fail(f"RigidTopology.{name} must hold integer body indices, got dtype {jnp.result_type(index)}")
    m = np.shape(topology.vertex_body)[0]
    k = np.shape(topology.push_body)[0]
    faces_shape = tuple(np.shape(topology.faces))
    if len(faces_shape) != 2 or faces_shape[1] != 3:
        _fail(f"RigidTopology.faces has shape {faces_shape}, expected [f, 3]")
    shapes = {
        "mass": (b,), "gyration": (b, 3, 3), "vertices": (m, 3), "contact_ke": (b,), "contact_kd": (b,),
        "contact_kf": (b,), "contact_mu": (b,), "restitution": (b,), "push_force": (k, 3),
        "push_point": (k, 3), "push_start": (k,), "push_end": (k,),
    }
    for name, shape in shapes.items():
        _check_shape(f"Params.rigid.{name}", getattr(params, name), shape)
    if state is not None:
        for name, width in (("x", 3), ("q", 4), ("v", 3), ("w", 3)):
            _check_shape(f"State.rigid.{name}", getattr(state, name), (b, width))
    if not is_concrete(topology, params, state):
        return

    _check_indices("RigidTopology.vertex_body", topology.vertex_body, b, "bodies")
    _check_indices("RigidTopology.push_body", topology.push_body, b, "bodies")
    check_index_rows("RigidTopology.faces", np.asarray(topology.faces), m)
    for name in shapes:  # a push may last for ever (push_end = inf)
        _check_finite(f"Params.rigid.{name}", finite_view(f"rigid.{name}", np.asarray(getattr(params, name))))
    for name in ("mass", "contact_ke", "contact_kd", "contact_kf", "contact_mu", "restitution"):
        value = np.asarray(getattr(params, name))
        if (value < 0).any():
            i = int(np.argmax(value < 0))
            _fail(f"Params.rigid.{name}[{i}] is negative ({value[i]})")
    restitution = np.asarray(params.restitution)
    if (restitution > 1).any():
        i = int(np.argmax(restitution > 1))
        _fail(f"Params.rigid.restitution[{i}] is {restitution[i]}, expected in [0, 1]")
    gyration = np.asarray(params.gyration, dtype=np.float64)
    mass = np.asarray(params.mass)
    for i in range(b):
        g = gyration[i]
        scale = max(float(np.abs(g).max()), 1e-300)
        if not np.allclose(g, g.T, rtol=0.0, atol=1e-6 * scale):
            _fail(f"Params.rigid.gyration[{i}] is not symmetric: {g.tolist()}")
        smallest = float(np.linalg.eigvalsh(0.5 * (g + g.T)).min())
        if smallest < -1e-9 * scale:
            _fail(f"Params.rigid.gyration[{i}] is not positive semi-definite (eigenvalue {smallest:.3g} m^2)")
        if mass[i] > 0 and smallest <= 1e-12 * scale:
            _fail(f"Params.rigid.gyration[{i}] is singular (eigenvalue {smallest:.3g} m^2) but body {i} has "
                  f"mass {mass[i]} kg: a free body needs a positive definite inertia")
    if state is not None:
        for name in ("x", "q", "v", "w"):
            _check_finite(f"State.rigid.{name}", getattr(state, name))
        norm = np.linalg.norm(np.asarray(state.q, dtype=np.float64), axis=-1)
        bad = np.abs(norm - 1.0) > 1e-3
        if bad.any():
            i = int(np.argmax(bad))
            _fail(f"State.rigid.q[{i}] has norm {norm[i]:.6g}, expected a unit quaternion (within 1e-3) "
                  f"for body {i}")
