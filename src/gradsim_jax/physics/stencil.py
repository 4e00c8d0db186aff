"""Element forces of a structured grid as dense stencil work: slices in, padded adds out, no gathers.

On accelerators gathers and scatter-adds are slow (on a TPU a 128 x 128 cloth's step was bound by them). A
cloth built as a regular grid (`geometry.cloth_grid`) has its particles on a rows x cols lattice
(particle (i, j) = offset + i cols + j) and its elements in a few families: every element of a family has
the same shape on the lattice (corner k at the lattice offset (dr_k, dc_k) from the element's anchor) and
the anchors of a family fill a rectangle. The lattice's particles are a contiguous run, viewed flat in
row-major order ([rows cols, 3], or [3, rows cols] "planes", components first, so that the long axis is
minor, as a TPU tiles it). A family's anchors (a, b) sit at flat slots a cols + b; corner k of the element
at slot p is lattice particle r_k cols + c_k + p, so each corner of a family is one contiguous slice of
the flat lattice. The slots with b >= Cf between the anchors hold no element: zero coefficients there make
their forces exactly zero. The families' slices are concatenated along the element axis, so that the
per-element kernel (the very one the gather path vmaps) runs once over every family; and each particle's
force, the sum of its incident corners' forces, is the sum of every corner's part zero-padded back to the
flat lattice at its shift: the transpose of the slice. A gradient transposes slices into pads and pads
into slices, so no pass gathers or scatters.

`find_cloth_grid` finds the lattice and the families of a mesh's triangles and bending edges, or says
there are none: the families are read off the elements themselves and every element is placed in exactly
one slot whose lattice corners are its own particles, so the stencil sums the same element forces as the
gather path, in another order (float round-off apart). A mesh that is no grid keeps the gather path.
Per-element parameters ([t] or [e] arrays, data) are laid out in the families once per rollout
(`family_values`, from the `ClothGrid`'s order arrays, a gather of t or e scalars).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import current_backend
from gradsim_jax.typing import Array, pytree_dataclass

#: The most families a grid's triangles (resp. bending edges) may form: a grid cloth's have 2 (resp. 3);
#: a mesh whose elements need more is left to the gather path (each family costs slices and pads).
MAX_TRIANGLE_FAMILIES = 4
MAX_BEND_FAMILIES = 6

#: The backends on which a grid cloth takes the stencil path by default (`stencil_active`). Not the CPU: there
#: XLA runs the gather path faster (benchmarks/bench_stencil.py, results/stencil.json: the stencil's step
#: 1.2-1.5x slower, its gradient 1.6-1.8x, from the demo cloth to 128 x 128).
STENCIL_BACKENDS = ("tpu", "gpu", "cuda", "rocm")

#: The largest lattice span (rows or columns minus one) of one element: a bending hinge across a grid
#: edge spans 3 rows or columns.
MAX_SPAN = 2


class GridFamily(NamedTuple):
    """Elements of one shape on the lattice, their anchors filling a rectangle (static, hashable; a tuple, so
    that JAX's cache compares it in C, not by a method of this module).

    Attributes:
        shape: (Rf, Cf), the rows and columns of anchors.
        starts: ((r_k, c_k), ...) per corner k: the lattice position of corner k of the family's first
            element; corner k of the element at anchor (a, b) is particle (r_k + a, c_k + b).
    """

    shape: tuple
    starts: tuple

    @property
    def size(self) -> int:
        """The number of elements of the family (Rf Cf)."""
        return self.shape[0] * self.shape[1]


@pytree_dataclass(meta=("rows", "cols", "offset", "tri_families", "bend_families", "enabled", "planes"))
class ClothGrid:
    """A cloth's lattice and its element families (`find_cloth_grid`), for the stencil forces.

    Attributes:
        tri_order: [t] int32, the triangle in each family slot: the slots of family 0 row-major over its
            anchors, then family 1's, ...
        bend_order: [e] int32, the same for the bending edges.
        rows: the lattice's rows (static).
        cols: the lattice's columns (static).
        offset: the index of particle (0, 0); the lattice holds particles offset .. offset + rows cols - 1.
        tri_families: the triangles' `GridFamily`s (static tuple).
        bend_families: the bending edges' `GridFamily`s (static tuple; empty without bending edges).
        enabled: whether the forces take the stencil path (static): None (the default), where the backend
            is in `STENCIL_BACKENDS` (`stencil_active`); True or False: always or never.
        planes: the lattice's layout (static): False, [rows cols, 3], a particle's vector in a row, as the
            gather path's blocks (what XLA's CPU backend runs fastest); True, [3, rows cols], one plane per
            component, the long axis minor (what a TPU's tiles want); None (the default): True off the CPU.
    """

    tri_order: Array
    bend_order: Array
    rows: int = 0
    cols: int = 0
    offset: int = 0
    tri_families: tuple = ()
    bend_families: tuple = ()
    enabled: Optional[bool] = None
    planes: Optional[bool] = None


def grid_families(elements, rows: int, cols: int, offset: int, max_families: int):
    """The families of `elements` on a lattice (module docstring), or None when they form none.

    Every element is placed in one slot of one family; a family must fill its rectangle of anchors, each
    slot once. Host-side (numpy).

    Args:
        elements: [E, k] int, particle indices of each element's corners (host array).
        rows: the lattice's rows.
        cols: the lattice's columns.
        offset: the index of lattice particle (0, 0).
        max_families: the most families accepted.

    Returns:
        (families, a tuple of `GridFamily`; order [E] int32 numpy, the element in each slot, families one
        after another), or None.
    """
    idx = np.asarray(elements, np.int64) - offset
    if idx.ndim != 2 or idx.shape[0] == 0 or idx.min() < 0 or idx.max() >= rows * cols:
        return None
    r, c = np.divmod(idx, cols)
    ar, ac = r.min(1), c.min(1)
    dr, dc = r - ar[:, None], c - ac[:, None]
    if max(dr.max(), dc.max()) > MAX_SPAN:
        return None
    keys = np.concatenate([dr, dc], 1) @ ((MAX_SPAN + 1) ** np.arange(2 * idx.shape[1]))
    kinds, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if len(kinds) > max_families:
        return None
    families, orders = [], []
    for f in range(len(kinds)):
        members = np.flatnonzero(inverse.reshape(-1) == f)
        r0, c0 = ar[members].min(), ac[members].min()
        shape = (int(ar[members].max() - r0 + 1), int(ac[members].max() - c0 + 1))
        slot = (ar[members] - r0) * shape[1] + (ac[members] - c0)
        if members.size != shape[0] * shape[1] or np.unique(slot).size != members.size:
            return None
        order = np.empty(members.size, np.int64)
        order[slot] = members
        e = first[f]
        families.append(GridFamily(shape, tuple((int(r0 + dr[e, k]), int(c0 + dc[e, k]))
                                                for k in range(idx.shape[1]))))
        orders.append(order)
    return tuple(families), np.concatenate(orders).astype(np.int32)


def _lattice_candidates(triangles) -> list:
    """(cols, offset, rows) lattices the triangles could lie on: each distinct index difference along a
    triangle edge is a candidate row length (a grid's are 1, cols - 1 or cols + 1, and cols)."""
    tris = np.asarray(triangles, np.int64)
    low, high = int(tris.min()), int(tris.max())
    span = high - low + 1
    diffs = np.unique(np.abs(tris[:, [1, 2, 0]] - tris))
    return [(int(d), low, span // int(d)) for d in diffs if d >= 2 and span % d == 0]


def find_cloth_grid(triangles, bend_edges, num_particles: int) -> Optional[ClothGrid]:
    """The lattice and families of a cloth's triangles and bending edges (module docstring), or None when the
    triangles (or the bending edges) are no grid of at most `MAX_TRIANGLE_FAMILIES` (`MAX_BEND_FAMILIES`)
    families (of the lattices that fit, the one with the fewest families). Host-side (numpy): `Scene.build`
    calls it.

    Args:
        triangles: [t, 3] int, the membrane triangles (host array).
        bend_edges: [e, 4] int, the bending edges (host array; may be empty).
        num_particles: n, the number of particles.

    Returns:
        A `ClothGrid` (its order arrays as device int32 arrays), or None.
    """
    tris, edges = np.asarray(triangles), np.asarray(bend_edges).reshape(-1, 4)
    if tris.size == 0 or tris.min() < 0 or tris.max() >= num_particles:
        return None
    best = None
    for cols, offset, rows in _lattice_candidates(tris):
        found = grid_families(tris, rows, cols, offset, MAX_TRIANGLE_FAMILIES)
        bends = ((), np.zeros(0, np.int32)) if edges.shape[0] == 0 else grid_families(
            edges, rows, cols, offset, MAX_BEND_FAMILIES)
        if found is None or bends is None:
            continue
        grid = ClothGrid(tri_order=jnp.asarray(found[1]), bend_order=jnp.asarray(bends[1]), rows=rows, cols=cols,
                         offset=offset, tri_families=found[0], bend_families=bends[0])
        if best is None or _families(grid) < _families(best):
            best = grid
    return best


def _families(grid: ClothGrid) -> int:
    return len(grid.tri_families) + len(grid.bend_families)


def _family_mismatch(elements, order, families, grid) -> Optional[str]:
    """Why the families and order do not hold exactly the elements [E, k] (host arrays), or None."""
    order = np.asarray(order)
    if order.shape != (elements.shape[0],) or sum(f.size for f in families) != elements.shape[0]:
        return f"has {order.shape} slots for {elements.shape[0]} elements"
    if elements.shape[0] and np.unique(order).size != elements.shape[0]:
        return "does not list each element once"
    start = 0
    for f in families:
        if len(f.starts) != elements.shape[1]:
            return f"has a family of {len(f.starts)} corners for elements of {elements.shape[1]}"
        a, b = np.meshgrid(np.arange(f.shape[0]), np.arange(f.shape[1]), indexing="ij")
        for k, (r, c) in enumerate(f.starts):
            expected = grid.offset + (r + a.reshape(-1)) * grid.cols + c + b.reshape(-1)
            if (r + f.shape[0] > grid.rows or c + f.shape[1] > grid.cols
                    or not np.array_equal(elements[order[start:start + f.size], k], expected)):
                return f"places an element whose corner {k} is not its lattice particle"
        start += f.size
    return None


def grid_mismatch(grid: ClothGrid, triangles, bend_edges, num_particles: int) -> Optional[str]:
    """Why `grid` does not describe these triangles and bending edges exactly, or None when it does
    (`validate_scene` asks for a concrete scene). Host-side (numpy).

    Args:
        grid: the `ClothGrid` to check.
        triangles: [t, 3] int, the membrane triangles (host array).
        bend_edges: [e, 4] int, the bending edges (host array).
        num_particles: n, the number of particles.

    Returns:
        A sentence fragment ("places an element ..."), or None.
    """
    if grid.rows < 1 or grid.cols < 1 or grid.offset < 0 or grid.offset + grid.rows * grid.cols > num_particles:
        return f"has a lattice of {grid.rows} x {grid.cols} from particle {grid.offset} beyond {num_particles}"
    for name, elements, order, families in (("triangles", triangles, grid.tri_order, grid.tri_families),
                                            ("bend_edges", bend_edges, grid.bend_order, grid.bend_families)):
        why = _family_mismatch(np.asarray(elements), order, families, grid)
        if why is not None:
            return f"{why} (for the {name})"
    return None


def stencil_active(grid: Optional[ClothGrid]) -> bool:
    """Whether a cloth's forces take the stencil path: a grid (not None) whose `enabled` is True, or None with
    `compilation.current_backend()` in `STENCIL_BACKENDS`. Read while tracing (static).

    Args:
        grid: `ClothTopology.grid`, or None.

    Returns:
        True for the stencil path, False for the gather path.
    """
    if grid is None:
        return False
    return current_backend() in STENCIL_BACKENDS if grid.enabled is None else bool(grid.enabled)


def lattice_planes(grid: ClothGrid) -> bool:
    """The lattice layout in use: `grid.planes`, or where it is None, True off the CPU.

    Args:
        grid: the `ClothGrid`.

    Returns:
        True for [3, rows cols] planes, False for [rows cols, 3] rows.
    """
    return current_backend() != "cpu" if grid.planes is None else bool(grid.planes)


def _element_axis(grid: ClothGrid) -> int:
    return -1 if lattice_planes(grid) else 0


def lattice_view(a: Array, grid: ClothGrid) -> Array:
    """Per-particle 3-vectors as the lattice's flat rows: a slice, no gather.

    Args:
        a: [n, 3] per-particle vectors (positions m, velocities m/s).
        grid: the `ClothGrid`.

    Returns:
        [rows cols, 3] the lattice particles' vectors in row-major lattice order, or [3, rows cols] when
        `grid.planes`; in `a`'s unit.
    """
    size = grid.rows * grid.cols
    rows = a[grid.offset:grid.offset + size]
    return rows.T if lattice_planes(grid) else rows


def from_lattice(f: Array, grid: ClothGrid, num_particles: int) -> Array:
    """Flat lattice vectors back as [n, 3] per particle (zero off the lattice): `lattice_view`'s transpose.

    Args:
        f: [rows cols, 3] (or [3, rows cols] when `grid.planes`) per-lattice-particle vectors (forces N).
        grid: the `ClothGrid`.
        num_particles: n, the number of particles.

    Returns:
        [n, 3] in `f`'s unit.
    """
    rows = f.T if lattice_planes(grid) else f
    return jnp.pad(rows, ((grid.offset, num_particles - grid.offset - rows.shape[0]), (0, 0)))


def family_span(family: GridFamily, grid: ClothGrid) -> int:
    """The number of flat anchor slots of a family, (Rf - 1) cols + Cf: its anchors (a, b) at a cols + b,
    and the slots with b >= Cf between them (no element: zero coefficients, zero force).

    Args:
        family: the `GridFamily`.
        grid: the `ClothGrid`.

    Returns:
        The span P.
    """
    return (family.shape[0] - 1) * grid.cols + family.shape[1]


def family_corners(lattice: Array, families: tuple, grid: ClothGrid) -> tuple:
    """The corners of the families' elements, each a contiguous slice of the flat lattice per family (corner
    k of the element at slot p of a family is lattice particle r_k cols + c_k + p), the families' slices
    one after another along the element axis: one kernel call covers every family.

    Args:
        lattice: `lattice_view`'s flat lattice.
        families: the elements' `GridFamily`s (each with as many corners).
        grid: the `ClothGrid`.

    Returns:
        One [P, 3] (or [3, P] when `grid.planes`) array per corner, P the sum of the families' spans
        (`family_span`), in `lattice`'s unit.
    """
    axis = _element_axis(grid) % lattice.ndim
    per_corner = zip(*[[jax.lax.slice_in_dim(lattice, r * grid.cols + c, r * grid.cols + c + family_span(f, grid),
                                             axis=axis) for r, c in f.starts] for f in families])
    return tuple(parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis) for parts in per_corner)


def lattice_forces(forces, families: tuple, grid: ClothGrid) -> Array:
    """The per-particle sum of the corner forces on the flat lattice: each family's part of each corner's
    forces zero-padded to the lattice at the corner's place (the transpose of `family_corners`), added up.

    Args:
        forces: one [P, 3] (or [3, P] when `grid.planes`) array per corner, in `family_corners`' layout
            (forces N).
        families: the elements' `GridFamily`s.
        grid: the `ClothGrid`.

    Returns:
        [rows cols, 3] (or [3, rows cols]), the sum, in the forces' unit.
    """
    size, total, start = grid.rows * grid.cols, None, 0
    for family in families:
        span = family_span(family, grid)
        for f, (r, c) in zip(forces, family.starts):
            axis = _element_axis(grid) % f.ndim
            part = jax.lax.slice_in_dim(f, start, start + span, axis=axis)
            shift = r * grid.cols + c
            width = [(0, 0)] * f.ndim
            width[axis] = (shift, size - shift - span)
            padded = jnp.pad(part, width)
            total = padded if total is None else total + padded
        start += span
    return total


def family_values(values: Array, order: Array, families: tuple, grid: ClothGrid) -> Array:
    """Per-element values laid out in the families' flat anchor slots (`family_span`) as `family_corners`
    lays out the elements, zero in the slots without an element: [E, ...] -> [P, ...] ([..., P] when
    `grid.planes`). One gather of E rows: do it once per rollout (a force term's `prepare`).

    Args:
        values: [E, ...] per-element values (stiffness, rest shapes, ...), in element order.
        order: [E] int, the element in each family slot (`ClothGrid.tri_order` or `bend_order`).
        families: the elements' `GridFamily`s.
        grid: the `ClothGrid`.

    Returns:
        The laid-out values, in `values`' unit.
    """
    values = jnp.asarray(values)[jnp.asarray(order)]
    out, start = [], 0
    for f in families:
        block = values[start:start + f.size].reshape(f.shape + values.shape[1:])
        block = jnp.pad(block, ((0, 0), (0, grid.cols - f.shape[1])) + ((0, 0),) * (values.ndim - 1))
        out.append(block.reshape((-1,) + values.shape[1:])[:family_span(f, grid)])
        start += f.size
    block = out[0] if len(out) == 1 else jnp.concatenate(out, 0)
    return jnp.moveaxis(block, 0, -1) if lattice_planes(grid) else block


def lattice_map(kernel, grid: ClothGrid):
    """`kernel`, written for one element, mapped over a family's flat anchor slots: the first axis of every
    argument and result ([P, 3] vectors, [P, 2, 2] matrices, [P] scalars), or the last when `grid.planes`.

    Args:
        kernel: a function of one element's arrays.
        grid: the `ClothGrid`.

    Returns:
        The mapped function.
    """
    axis = _element_axis(grid)
    return jax.vmap(kernel, in_axes=axis, out_axes=axis)


@pytree_dataclass
class MembraneFamilies:
    """What the stencil membrane forces need of a grid's triangles, laid out in its families' slots
    (`family_values`; P slots, the element axis last when `ClothGrid.planes`): gram_inv [P, 2, 2] 1/m^2
    (`cloth.rest_shapes`), rest_area [P] m^2, and the `ClothParams` coefficients ke, ka, kd, activation,
    drag, lift, each [P]."""

    gram_inv: Array
    rest_area: Array
    ke: Array
    ka: Array
    kd: Array
    activation: Array
    drag: Array
    lift: Array


def membrane_families(grid, gram_inv, rest_area, cloth) -> MembraneFamilies:
    """The membrane's rest shapes and coefficients laid out in the grid's triangle families
    (`family_values`): what `cloth.prepare_membrane` gives the stencil forces.

    Args:
        grid: the `ClothGrid`.
        gram_inv: [t, 2, 2] 1/m^2, the triangles' inverse rest Gram matrices (`cloth.rest_shapes`).
        rest_area: [t] m^2, their rest areas.
        cloth: the `ClothParams` (tri_ke, tri_ka, tri_kd, tri_activation, tri_drag, tri_lift, each [t]).

    Returns:
        The `MembraneFamilies`.
    """
    return MembraneFamilies(*(family_values(a, grid.tri_order, grid.tri_families, grid)
                              for a in (gram_inv, rest_area, cloth.tri_ke, cloth.tri_ka, cloth.tri_kd,
                                        cloth.tri_activation, cloth.tri_drag, cloth.tri_lift)))


@pytree_dataclass
class BendingFamilies:
    """What the stencil bending forces need of a grid's bending edges, laid out in its families' slots
    (`family_values`): the `ClothParams` coefficients ke, kd and rest (rad), each [P]."""

    ke: Array
    kd: Array
    rest: Array


def bending_families(grid, cloth) -> BendingFamilies:
    """The bending coefficients laid out in the grid's edge families (`family_values`): what
    `cloth.prepare_bending` gives the stencil forces.

    Args:
        grid: the `ClothGrid`.
        cloth: the `ClothParams` (bend_ke, bend_kd, bend_rest, each [e]).

    Returns:
        The `BendingFamilies`.
    """
    return BendingFamilies(*(family_values(a, grid.bend_order, grid.bend_families, grid)
                             for a in (cloth.bend_ke, cloth.bend_kd, cloth.bend_rest)))
