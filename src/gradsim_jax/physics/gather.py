"""Element <-> particle indexing for the force models: gather element corners, sum their forces per particle
(and `eager_if_concrete`, which keeps the elements' rest shapes out of XLA's constant folding).

The sum of per-corner forces into particles is a scatter-add, which XLA on a CPU runs as a serial loop
over the corners: for a 128 x 128 cloth it cost more than the triangle forces themselves, and the gradient
needs one more per gathered quantity (the transpose of a gather is a scatter-add). With a corner incidence
table (`corner_incidence`: for each particle, the flat corner indices where it appears, padded), the sum is
a gather instead: K gathers of n rows added up (K = the most corners a particle has, 6 for a triangle
grid), about twice as fast. `gather_corners` and `scatter_corners` given that table are two primitives,
each the other's transpose, so every pass of a gradient (forward, tangent, cotangent) gathers and never
scatters: a 128 x 128 cloth's step 1.3x faster, its gradient 1.7x, bit for bit the same sums up to their
order. Without a table (`incidence=None`) both fall back to XLA's gather and scatter-add.

Index arrays are checked to lie in [0, n) before any compilation (`validate_scene`; the table against its
elements too), so both directions promise in-bounds indices and skip negative-index wrapping: no clamping
or bounds masks in the step, and nothing for XLA to constant-fold when a topology's index arrays are
compile-time constants (a scene closed over by a jitted loss).
"""

from __future__ import annotations

import concurrent.futures
import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from gradsim_jax.compilation import jit
from gradsim_jax.typing import Array


def corner_incidence(elements, num_particles: int) -> Optional[np.ndarray]:
    """Host-side table [K, n] int32: column i lists the flat corner indices e * k + s (element e, corner s of
    `elements` [E, k]) at which particle i appears, in increasing order, padded with E * k (no corner).
    K = the largest count (at least 1). None for no elements.

    Args:
        elements: [E, k] int, particle indices of each element's corners (host array).
        num_particles: n, the number of particles (columns of the table).

    Returns:
        [K, n] int32 numpy table, or None when there is no element.
    """
    flat = np.asarray(elements, np.int64).reshape(-1)
    if flat.size == 0:
        return None
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=num_particles)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    table = np.full((max(int(counts.max()), 1), num_particles), flat.size, np.int32)
    for k in range(table.shape[0]):
        has = counts > k
        table[k, has] = order[starts[has] + k]
    return table


def incidence_mismatch(elements, incidence, num_particles: int) -> Optional[str]:
    """Why the host arrays `incidence` and `elements` [E, k] disagree (as `corner_incidence` builds it), or
    None when the table lists every corner once, under its own particle.

    Args:
        elements: [E, k] int, particle indices of each element's corners (host array).
        incidence: the table to check, expected [K, n] int (host array).
        num_particles: n, the number of particles.

    Returns:
        A sentence fragment saying what is wrong ("has shape ..."), or None when the table is right.
    """
    flat = np.asarray(elements).reshape(-1)
    table = np.asarray(incidence)
    if table.ndim != 2 or table.shape[1] != num_particles:
        return f"has shape {table.shape}; expected [K, {num_particles}]"
    listed = table[table < flat.size]
    if (table < 0).any() or (table > flat.size).any():
        return f"holds indices outside [0, {flat.size}]"
    if listed.size != flat.size or np.unique(listed).size != flat.size:
        return f"lists {listed.size} corners ({np.unique(listed).size} distinct) of {flat.size}"
    rows, cols = np.nonzero(table < flat.size)
    wrong = flat[table[rows, cols]] != cols
    if wrong.any():
        j = int(np.argmax(wrong))
        return f"lists corner {int(table[rows[j], cols[j]])} under particle {int(cols[j])}"
    return None


def _gather_rows(x, flat, incidence):
    del incidence
    return jnp.asarray(x).at[jnp.asarray(flat)].get(mode="promise_in_bounds", wrap_negative_indices=False)


def _sum_rows(f, flat, incidence):
    del flat
    f, incidence = jnp.asarray(f), jnp.asarray(incidence)
    total = None
    for k in range(incidence.shape[0]):
        rows = f.at[incidence[k]].get(mode="fill", fill_value=0, wrap_negative_indices=False)
        total = rows if total is None else total + rows
    return total


_gather_p = Primitive("corner_gather")
_sum_p = Primitive("corner_sum")
for _p, _impl in ((_gather_p, _gather_rows), (_sum_p, _sum_rows)):
    _p.def_impl(_impl)
    mlir.register_lowering(_p, mlir.lower_fun(_impl, multiple_results=False))
_gather_p.def_abstract_eval(lambda x, flat, incidence: jax.core.ShapedArray(flat.shape + x.shape[1:], x.dtype))
_sum_p.def_abstract_eval(lambda f, flat, incidence: jax.core.ShapedArray(incidence.shape[1:] + f.shape[1:],
                                                                         f.dtype))


def _linear_jvp(prim):
    def jvp(primals, tangents):
        value, flat, incidence = primals
        out = prim.bind(value, flat, incidence)
        if type(tangents[0]) is ad.Zero:
            return out, ad.Zero.from_primal_value(out)
        return out, prim.bind(tangents[0], flat, incidence)
    return jvp


def _transpose_into(other):
    def transpose(ct, value, flat, incidence):
        if type(ct) is ad.Zero:
            return ad.Zero(value.aval), None, None
        return other.bind(ct, flat, incidence), None, None
    return transpose


def _batched(prim, impl):
    def rule(args, dims):
        value, flat, incidence = args
        if dims[1] is None and dims[2] is None:  # one mesh, a batch of values: move the batch behind the rows
            return prim.bind(jnp.moveaxis(value, dims[0], 1), flat, incidence), 1
        return jax.vmap(impl, in_axes=dims)(value, flat, incidence), 0  # a batch of meshes
    return rule


for _p, _other, _impl in ((_gather_p, _sum_p, _gather_rows), (_sum_p, _gather_p, _sum_rows)):
    ad.primitive_jvps[_p] = _linear_jvp(_p)
    ad.primitive_transposes[_p] = _transpose_into(_other)
    batching.primitive_batchers[_p] = _batched(_p, _impl)


def _gather_flat(x: Array, flat: Array, incidence: Optional[Array]) -> Array:
    """x[flat] for in-range flat corner indices; with their incidence table its transpose is a gather."""
    x = jnp.asarray(x)
    if incidence is None:
        return x.at[flat].get(mode="promise_in_bounds", wrap_negative_indices=False)
    return _gather_p.bind(x, flat, incidence)


def _sum_flat(flat_f: Array, flat: Array, num_particles: int, incidence: Optional[Array]) -> Array:
    """Per-particle sum of the rows flat_f at flat corner indices: a scatter-add, or with their incidence
    table a sum of gathers."""
    if incidence is None:
        return jnp.zeros((num_particles,) + flat_f.shape[1:], flat_f.dtype).at[flat].add(
            flat_f, mode="promise_in_bounds", wrap_negative_indices=False)
    return _sum_p.bind(flat_f, flat, incidence)


def gather_corners(x: Array, elements: Array, incidence: Optional[Array] = None) -> Array:
    """x[elements]: [e, k, ...] from x [n, ...] and in-range indices elements [e, k]; with `incidence`
    (`corner_incidence(elements, n)`) its transpose in a gradient is a gather too.

    Args:
        x: [n, ...] per-particle values (positions m, velocities m/s, ...).
        elements: [e, k] int, particle indices in [0, n) of each element's corners.
        incidence: `corner_incidence(elements, n)` [K, n] int32, or None for XLA's gather and scatter-add.

    Returns:
        [e, k, ...] the values at the elements' corners, in `x`'s unit.
    """
    e, k = elements.shape
    rows = _gather_flat(x, elements.reshape(-1), incidence)
    return rows.reshape((e, k) + rows.shape[1:])


def scatter_corners(f: Array, elements: Array, num_particles: int, incidence: Optional[Array] = None) -> Array:
    """Per-particle sum [n, ...] of per-corner forces f [e, k, ...] at in-range indices elements [e, k]; with
    `incidence` (`corner_incidence(elements, n)`) a sum of gathers instead of a scatter-add.

    Args:
        f: [e, k, ...] per-corner values (forces N, ...).
        elements: [e, k] int, particle indices in [0, n) of each element's corners.
        num_particles: n, the number of particles.
        incidence: `corner_incidence(elements, n)` [K, n] int32, or None for a scatter-add.

    Returns:
        [n, ...] the sum over each particle's corners, in `f`'s unit (0 for a particle in no element).
    """
    f = jnp.asarray(f)
    return _sum_flat(f.reshape((-1,) + f.shape[2:]), elements.reshape(-1), num_particles, incidence)


def corner_major_incidence(incidence: Optional[Array], num_elements: int, corners: int) -> Optional[Array]:
    """A `corner_incidence` table of elements [E, k] (flat corners e * k + s) renumbered for the corner-major
    order s * E + e of `gather_corners_major`; padding (E * k) stays padding; None stays None. Integer
    arithmetic on [K, n] that works on traced tables: compute it once per rollout (`corner_major_layout`),
    not in every step.

    Args:
        incidence: [K, n] int, the elements' `corner_incidence` table, or None.
        num_elements: E, the number of elements.
        corners: k, the corners of an element.

    Returns:
        [K, n] the renumbered table (same dtype), or None.
    """
    if incidence is None:
        return None
    pad = num_elements * corners
    incidence = jnp.asarray(incidence)
    k = jnp.asarray(corners, incidence.dtype)
    major = lax.rem(incidence, k) * jnp.asarray(num_elements, incidence.dtype) + lax.div(incidence, k)
    return jnp.where(incidence >= pad, jnp.asarray(pad, incidence.dtype), major)


def corner_major_flat(elements: Array) -> Array:
    """elements.T.reshape(-1): the particle of each corner in corner-major order (corner s of element e at
    s * E + e), as `gather_corners_major` takes it precomputed (`flat`).

    Args:
        elements: [E, k] int, particle indices of each element's corners.

    Returns:
        [k * E] int, the particle index of each corner, corner-major.
    """
    return jnp.asarray(elements).T.reshape(-1)


def _corner_major_layout(elements, incidence):
    e, k = elements.shape
    return corner_major_flat(elements), corner_major_incidence(incidence, e, k)


def corner_major_layout(elements: Array, incidence: Optional[Array]) -> tuple:
    """(`corner_major_flat(elements)`, `corner_major_incidence` of their table or None): what the
    corner-major gathers and sums take, computed once per rollout by a force term's `prepare` and
    evaluated right away for a closed-over scene (`eager_if_concrete`).

    Args:
        elements: [E, k] int, particle indices of each element's corners.
        incidence: [K, n] int, the elements' `corner_incidence` table, or None.

    Returns:
        (flat [k * E] int, major incidence [K, n] int or None).
    """
    return eager_if_concrete(_corner_major_layout, elements, incidence)


def gather_corners_major(x: Array, elements: Array, major_incidence: Optional[Array] = None,
                         flat: Optional[Array] = None) -> Array:
    """x[elements.T]: [k, e, ...], corner by corner, from x [n, ...] and in-range elements [e, k]; with
    `major_incidence` (`corner_major_incidence` of the elements' `corner_incidence` table) its transpose is
    a gather too. `flat`: `corner_major_flat(elements)` if computed already (`corner_major_layout`, once
    per rollout rather than in every step).

    Corner-major rows let a force kernel take each corner as a contiguous [e, ...] block (`unstack` along
    axis 0) and hand its per-corner forces back as one `jnp.stack`: no slicing or stacking along a short
    minor axis, which XLA's CPU backend emits element by element (a 128 x 128 cloth's membrane step went
    0.90 -> 0.59 ms with the kernel written this way).

    Args:
        x: [n, ...] per-particle values (positions m, velocities m/s, ...).
        elements: [e, k] int, particle indices in [0, n) of each element's corners.
        major_incidence: [K, n] int, `corner_major_incidence` of the elements' table, or None for XLA's gather
            and scatter-add.
        flat: [k * e] int, `corner_major_flat(elements)` if computed already; None computes it here.

    Returns:
        [k, e, ...] the values at the corners, corner-major, in `x`'s unit.
    """
    e, k = elements.shape
    rows = _gather_flat(x, corner_major_flat(elements) if flat is None else flat, major_incidence)
    return rows.reshape((k, e) + rows.shape[1:])


def scatter_corners_major(f: Array, elements: Array, num_particles: int,
                          major_incidence: Optional[Array] = None, flat: Optional[Array] = None) -> Array:
    """Per-particle sum [n, ...] of corner-major forces f [k, e, ...] (`gather_corners_major`'s layout) at
    in-range elements [e, k]; with `major_incidence` (as for `gather_corners_major`) a sum of gathers
    instead of a scatter-add; `flat` as there.

    Args:
        f: [k, e, ...] per-corner values, corner-major (forces N, ...).
        elements: [e, k] int, particle indices in [0, n) of each element's corners.
        num_particles: n, the number of particles.
        major_incidence: [K, n] int, as for `gather_corners_major`, or None for a scatter-add.
        flat: [k * e] int, `corner_major_flat(elements)` if computed already; None computes it here.

    Returns:
        [n, ...] the sum over each particle's corners, in `f`'s unit.
    """
    f = jnp.asarray(f)
    flat = corner_major_flat(elements) if flat is None else flat
    return _sum_flat(f.reshape((-1,) + f.shape[2:]), flat, num_particles, major_incidence)


def eager_if_concrete(fn, *args):
    """fn(*args), evaluated right away when no argument is traced (rest shapes of a scene closed over by a
    jitted function: staged into the program, XLA would constant-fold them at compile time). It runs as one
    program compiled from the arguments' shapes alone, cached per function, structure, shapes and dtypes: op
    by op, each of its ~30 operations compiled a program of its own for every new mesh size (1.1 s a scene,
    against 0.13 s). It is compiled outside the caller's `jax.ensure_compile_time_eval`, under which tracing
    stages every fill of fn (a `zeros_like` [t, 2, 2]) as a constant of its program.

    Args:
        fn: a jax-traceable function of `args` (hashable: it is part of the cache key).
        *args: its arguments, pytrees of arrays.

    Returns:
        fn(*args): concrete arrays when no argument is traced, else traced values of the caller's trace.
    """
    if any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(args)):
        return fn(*args)
    with jax.ensure_compile_time_eval():  # concrete conversions, also while a jit traces the caller
        leaves, tree = jax.tree.flatten(args)
        leaves = [jnp.asarray(a) for a in leaves]
        program = _compiled(fn, tree, tuple((a.shape, a.dtype, a.weak_type) for a in leaves),
                            jax.config.jax_enable_x64)
        return program(*jax.tree.unflatten(tree, leaves))


@functools.lru_cache(maxsize=256)
def _compiled(fn, tree, signature, x64: bool):
    """`fn` lowered and compiled for arguments of structure `tree` with leaves `signature` ((shape, dtype,
    weak type) each); `x64`, the dtype mode it is compiled in, is part of the cache key."""
    specs = jax.tree.unflatten(tree, [jax.ShapeDtypeStruct(s, d, weak_type=w) for s, d, w in signature])

    def compile_():
        with jax.enable_x64(x64):
            return jit(fn).lower(*specs).compile()

    # In a thread of its own: JAX's trace and configuration contexts are per thread, and the caller's may fold
    # constants (`jax.ensure_compile_time_eval`), which would stage fn's fills (zeros_like) as full constants.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(compile_).result()
