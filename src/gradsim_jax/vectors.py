"""Two primitives that shape how XLA's CPU backend compiles the force kernels' gradients.

`unstack`: an array's slices along an axis, with a gradient that stacks their cotangents once.

`a[i]` along a short axis (the corner axis of [3, t, 3] corner-major positions) is a slice, and the
transpose of a slice is a pad: a gradient through `p, q, r = a[0], a[1], a[2]` materializes three
zero-padded copies of the whole array and adds them up. `unstack(a, axis)` is one linear primitive whose
transpose is a single `jnp.stack` of the slices' cotangents (zeros where a slice has none) and whose
tangent is the same split of the tangent, so forward mode (`jax.linearize` in the Levenberg-Marquardt
polish), reverse mode, `vmap` and higher derivatives all work. Its forward is the slices themselves.

`materialize`: the identity, as a value XLA computes once into a buffer of its own. XLA's CPU fusion copies
cheap elementwise producers into every consumer, so a per-triangle scalar (a [t] array) that feeds [t, 3]
vectors is recomputed for each component, and in a gradient a chain of such scalar cotangents is
recomputed for every corner and component of the cotangents it feeds. `materialize` is a sum over a stacked
zero (a reduction, which XLA's CPU fusion does not copy into consumers), and its tangent and transpose are
`materialize` again, so the cotangent chains of a kernel's scalars are cut into buffers too: on the
membrane kernel's five scalar quantities it made a 128 x 128 cloth's gradient 3.07 -> 2.44 ms a step.
`materialize_cotangent` is the identity in the forward pass (and in forward-mode tangents) and materializes
only the cotangent: on the kernel's vector intermediates (the elastic and area terms and the forces) it
cuts the backward pass where a buffer in the forward pass would cost more than it saves (2.4 -> 2.1 ms).

`sub3`, `dot3`, `cross3`: 3-vector algebra on tuples of components (each an array), as the entry-wise
kernels (bending, large FEM meshes) write it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

_unstack_p = Primitive("unstack")
_unstack_p.multiple_results = True


def _unstack_impl(a, *, axis: int):
    return [lax.index_in_dim(a, i, axis, keepdims=False) for i in range(a.shape[axis])]


def _unstack_abstract(a, *, axis: int):
    shape = a.shape[:axis] + a.shape[axis + 1:]
    return [jax.core.ShapedArray(shape, a.dtype, weak_type=a.weak_type)] * a.shape[axis]


def _unstack_jvp(primals, tangents, *, axis: int):
    (a,), (t,) = primals, tangents
    out = _unstack_p.bind(a, axis=axis)
    if type(t) is ad.Zero:
        return out, [ad.Zero.from_primal_value(o) for o in out]
    return out, _unstack_p.bind(t, axis=axis)


def _unstack_transpose(cts, a, *, axis: int):
    if all(type(ct) is ad.Zero for ct in cts):
        return [ad.Zero(a.aval)]
    part = _unstack_abstract(a.aval, axis=axis)[0]
    return [jnp.stack([jnp.zeros(part.shape, part.dtype) if type(ct) is ad.Zero else ct for ct in cts], axis=axis)]


def _unstack_batch(args, dims, *, axis: int):
    (a,), (d,) = args, dims
    moved = axis + 1 if axis >= d else axis  # `axis` counts the unbatched dimensions
    return _unstack_p.bind(a, axis=moved), [d if d < moved else d - 1] * a.shape[moved]


_unstack_p.def_impl(_unstack_impl)
_unstack_p.def_abstract_eval(_unstack_abstract)
mlir.register_lowering(_unstack_p, mlir.lower_fun(_unstack_impl, multiple_results=True))
ad.primitive_jvps[_unstack_p] = _unstack_jvp
ad.primitive_transposes[_unstack_p] = _unstack_transpose
batching.primitive_batchers[_unstack_p] = _unstack_batch


def unstack(a, axis: int = 0) -> tuple:
    """The slices of `a` along `axis`: a tuple of a.shape[axis] arrays, as `tuple(jnp.moveaxis(a, axis, 0))`,
    whose gradient is one stack of their cotangents instead of a pad for each.

    Args:
        a: an array of at least one dimension (a ValueError otherwise).
        axis: the axis to slice along; negative counts from the end (a ValueError when out of range).

    Returns:
        A tuple of a.shape[axis] arrays, each of `a`'s shape without `axis`.
    """
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("unstack needs an array of at least one dimension")
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"axis {axis} is out of range for an array of {a.ndim} dimensions")
    return tuple(_unstack_p.bind(a, axis=axis % a.ndim))


def _materialize_impl(a):
    return jnp.sum(jnp.stack([a, jnp.zeros_like(a)]), axis=0)


def _identity_primitive(name: str, impl) -> Primitive:
    """A primitive that is the identity in value, lowered as `impl`, whose tangent goes through the
    primitive itself and whose cotangent is materialized (by `_materialize_p`, looked up when a gradient is
    transposed)."""
    prim = Primitive(name)

    def jvp(primals, tangents):
        (a,), (t,) = primals, tangents
        out = prim.bind(a)
        if type(t) is ad.Zero:
            return out, ad.Zero.from_primal_value(out)
        return out, prim.bind(t)

    def transpose(ct, a):
        return [ad.Zero(a.aval) if type(ct) is ad.Zero else _materialize_p.bind(ct)]

    prim.def_impl(impl)
    prim.def_abstract_eval(lambda a: jax.core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type))
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=False))
    ad.primitive_jvps[prim] = jvp
    ad.primitive_transposes[prim] = transpose
    batching.primitive_batchers[prim] = lambda args, dims: (prim.bind(args[0]), dims[0])
    return prim


_materialize_p = _identity_primitive("materialize", _materialize_impl)
_cotangent_p = _identity_primitive("materialize_cotangent", lambda a: a)


def materialize(a):
    """`a`, computed once into a buffer of its own rather than copied into each consumer by XLA's fusion;
    its tangents and cotangents are materialized too (see the module docstring).

    Args:
        a: any array.

    Returns:
        `a`'s value, same shape and dtype.
    """
    return _materialize_p.bind(jnp.asarray(a))


def materialize_cotangent(a):
    """`a` itself (no buffer in the forward pass or in forward-mode tangents), whose cotangent in a
    gradient is `materialize`d (see the module docstring).

    Args:
        a: any array.

    Returns:
        `a`'s value, same shape and dtype.
    """
    return _cotangent_p.bind(jnp.asarray(a))


def sub3(a, b) -> tuple:
    """a - b of 3-vectors given as tuples of their components.

    Args:
        a: (x, y, z), three arrays of one shape.
        b: (x, y, z), three arrays broadcastable with `a`'s.

    Returns:
        (x, y, z) of a - b, a tuple of three arrays.
    """
    return tuple(ai - bi for ai, bi in zip(a, b))


def dot3(a, b):
    """a . b of 3-vectors given as tuples of their components.

    Args:
        a: (x, y, z), three arrays of one shape.
        b: (x, y, z), three arrays broadcastable with `a`'s.

    Returns:
        The dot product, one array of the broadcast shape (unit: the product of the two units).
    """
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross3(a, b) -> tuple:
    """a x b of 3-vectors given as tuples of their components.

    Args:
        a: (x, y, z), three arrays of one shape.
        b: (x, y, z), three arrays broadcastable with `a`'s.

    Returns:
        (x, y, z) of a x b, a tuple of three arrays (unit: the product of the two units).
    """
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])
