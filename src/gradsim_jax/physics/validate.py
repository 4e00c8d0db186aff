"""Input checks that run on the host before anything is traced or compiled.

Every error is a `ValueError` naming the container field and the offending index. Checks are skipped for
values that are being traced (inside `jit`, `grad` or `vmap` the caller validated the concrete inputs).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

# Fields that must be >= 0, with the count they are indexed by.
_NONNEGATIVE = (
    "mass", "damping", "spring_ke", "spring_kd", "spring_rest", "tri_ke", "tri_ka", "tri_kd",
    "tri_drag", "tri_lift", "bend_ke", "bend_kd", "contact_ke", "contact_kd", "contact_kf", "contact_mu",
    "particle_radius",
)


def is_concrete(*values) -> bool:
    """True when no leaf of `values` is a tracer (so it can be inspected on the host)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(values))


def _first_index(mask) -> str:
    idx = np.argwhere(mask)[0]
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def _expect_shape(name, value, shape):
    actual = np.shape(value)
    if actual != shape:
        raise ValueError(f"{name} has shape {actual}, expected {shape}")


def validate_scene(topology, params, state=None) -> None:
    """Raise ValueError for malformed or unphysical scenes; a no-op on traced inputs."""
    if not is_concrete(topology, params, state):
        return
    n = np.shape(topology.pinned)[0]
    counts = {
        "springs": (topology.springs, 2),
        "triangles": (topology.triangles, 3),
        "bend_edges": (topology.bend_edges, 4),
    }
    sizes = {}
    for name, (idx, width) in counts.items():
        idx = np.asarray(idx)
        if idx.ndim != 2 or idx.shape[1] != width:
            raise ValueError(f"Topology.{name} has shape {idx.shape}, expected [count, {width}]")
        if idx.size and not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"Topology.{name} must hold integer indices, got dtype {idx.dtype}")
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            at = np.argwhere(bad)[0]
            raise ValueError(
                f"Topology.{name}[{at[0]}] = {idx[at[0]].tolist()} has an index out of range [0, {n})"
            )
        for a in range(width):
            for b in range(a + 1, width):
                same = idx[:, a] == idx[:, b]
                if same.any():
                    k = int(np.argmax(same))
                    raise ValueError(f"Topology.{name}[{k}] = {idx[k].tolist()} repeats a particle (degenerate)")
        sizes[name] = idx.shape[0]

    per = {"n": n, "s": sizes["springs"], "t": sizes["triangles"], "e": sizes["bend_edges"]}
    shapes = {
        "mass": ("n",), "gravity": (3,), "damping": (), "spring_ke": ("s",), "spring_kd": ("s",),
        "spring_rest": ("s",), "tri_ke": ("t",), "tri_ka": ("t",), "tri_kd": ("t",), "tri_activation": ("t",),
        "tri_drag": ("t",), "tri_lift": ("t",), "rest_x": ("n", 3), "bend_ke": ("e",), "bend_kd": ("e",),
        "bend_rest": ("e",), "contact_ke": (), "contact_kd": (), "contact_kf": (), "contact_mu": (),
        "ground_height": (), "ground_normal": (3,), "particle_radius": (),
    }
    for f in dataclasses.fields(params):
        value = np.asarray(getattr(params, f.name))
        _expect_shape(f"Params.{f.name}", value, tuple(per.get(d, d) for d in shapes[f.name]))
        finite = np.isfinite(value)
        if not finite.all():
            raise ValueError(f"Params.{f.name}{_first_index(~finite)} is not finite")
        if f.name in _NONNEGATIVE and (value < 0).any():
            at = _first_index(value < 0)
            raise ValueError(f"Params.{f.name}{at} is negative ({value[tuple(np.argwhere(value < 0)[0])]})")
    if np.linalg.norm(np.asarray(params.ground_normal)) == 0.0:
        raise ValueError("Params.ground_normal is the zero vector")

    if sizes["triangles"]:
        rest = np.asarray(params.rest_x, dtype=np.float64)
        tri = np.asarray(topology.triangles)
        e1, e2 = rest[tri[:, 1]] - rest[tri[:, 0]], rest[tri[:, 2]] - rest[tri[:, 0]]
        area = 0.5 * np.linalg.norm(np.cross(e1, e2), axis=1)
        scale = np.maximum(np.sum(e1 * e1, 1), np.sum(e2 * e2, 1))
        bad = area <= 1e-6 * scale
        if bad.any():
            k = int(np.argmax(bad))
            raise ValueError(f"Topology.triangles[{k}] = {tri[k].tolist()} has a degenerate rest shape "
                             f"(rest area {area[k]:.3g} m^2 in Params.rest_x)")

    if state is not None:
        for name in ("x", "v"):
            value = np.asarray(getattr(state, name))
            _expect_shape(f"State.{name}", value, (n, 3))
            finite = np.isfinite(value)
            if not finite.all():
                raise ValueError(f"State.{name}{_first_index(~finite)} is not finite")


def validate_dt(dt, name: str = "dt") -> None:
    """Raise ValueError unless the (concrete) time step is > 0."""
    if is_concrete(dt) and not float(np.asarray(dt)) > 0.0:
        raise ValueError(f"{name} must be > 0, got {dt!r}")
