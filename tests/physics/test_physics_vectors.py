"""`vectors.unstack` (slices whose gradient is one stack, not a pad per slice) and the corner-major gathers
of `physics.gather` that the membrane kernel runs on: the same values and derivatives as plain slicing and
the element-major gathers, in every mode of differentiation and under vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from gradsim_jax.physics.gather import (corner_incidence, corner_major_incidence, gather_corners,
                                       gather_corners_major, scatter_corners, scatter_corners_major)
from gradsim_jax.vectors import materialize, materialize_cotangent, unstack

ELEMENTS = np.array([[0, 1, 2], [2, 1, 3], [3, 4, 2], [4, 0, 2]], np.int32)
N = 6  # particle 5 belongs to no element


def _mix(parts):  # a nonlinear use of every slice
    return sum(jnp.sin(p) * (k + 1.0) for k, p in enumerate(parts)) * parts[0]


@pytest.mark.parametrize("axis", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(-1, marks=pytest.mark.slow)])  # 1, -1: suite time
def test_unstack_equals_slicing_in_value_and_every_derivative(x64, axis):
    del x64
    a = jax.random.normal(jax.random.key(0), (3, 4, 2), jnp.float64)
    parts = unstack(a, axis)
    want = tuple(jnp.moveaxis(a, axis, 0))
    assert len(parts) == a.shape[axis]
    for p, w in zip(parts, want):
        np.testing.assert_array_equal(p, w)
    f = lambda a: _mix(unstack(a, axis))  # noqa: E731
    g = lambda a: _mix(tuple(jnp.moveaxis(a, axis, 0)))  # noqa: E731
    check_grads(f, (a,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(jax.jacfwd(f)(a), jax.jacrev(g)(a), rtol=1e-14)
    np.testing.assert_allclose(jax.jacrev(f)(a), jax.jacrev(g)(a), rtol=1e-14)
    _, lin = jax.linearize(f, a)  # forward mode, as the Levenberg-Marquardt polish uses it
    t = jnp.ones_like(a)
    np.testing.assert_allclose(lin(t), jax.jvp(g, (a,), (t,))[1], rtol=1e-14)


def test_unstack_gradient_stacks_instead_of_padding():
    a = jnp.ones((3, 5, 3))
    text = jax.jit(jax.grad(lambda a: jnp.sum(_mix(unstack(a))))).lower(a).as_text()
    assert "stablehlo.pad" not in text and "stablehlo.concatenate" in text
    plain = jax.jit(jax.grad(lambda a: jnp.sum(_mix((a[0], a[1], a[2]))))).lower(a).as_text()
    assert "stablehlo.pad" in plain  # what unstack avoids


def test_unstack_under_vmap_with_the_batch_anywhere():
    a = jax.random.normal(jax.random.key(1), (4, 3, 5))
    for in_axis in (0, 1, 2):
        for axis in (0, 1):
            got = jax.vmap(lambda b: jnp.stack(unstack(b, axis)), in_axes=in_axis)(a)
            want = jax.vmap(lambda b: jnp.stack(tuple(jnp.moveaxis(b, axis, 0))), in_axes=in_axis)(a)
            np.testing.assert_array_equal(got, want)
    # the gradient of a vmapped use (the cotangent stack is batched too)
    f = lambda a: jnp.sum(jax.vmap(lambda b: _mix(unstack(b, 1)))(a))  # noqa: E731
    g = lambda a: jnp.sum(jax.vmap(lambda b: _mix(tuple(jnp.moveaxis(b, 1, 0))))(a))  # noqa: E731
    np.testing.assert_allclose(jax.grad(f)(a), jax.grad(g)(a), rtol=1e-6)


def test_unstack_rejects_scalars_and_axes_out_of_range():
    with pytest.raises(ValueError, match="at least one dimension"):
        unstack(jnp.float32(1.0))
    with pytest.raises(ValueError, match="out of range"):
        unstack(jnp.ones((2, 3)), 2)


def test_materialize_is_the_identity_in_every_mode_and_a_reduction_in_the_program(x64):
    del x64
    a = jax.random.normal(jax.random.key(3), (4, 3), jnp.float64)
    np.testing.assert_array_equal(materialize(a), a)
    f = lambda a: jnp.sin(materialize(a * a)) * a  # noqa: E731
    g = lambda a: jnp.sin(a * a) * a  # noqa: E731
    check_grads(f, (a,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(jax.jacfwd(f)(a), jax.jacrev(g)(a), rtol=1e-14)
    np.testing.assert_allclose(jax.jacrev(f)(a), jax.jacrev(g)(a), rtol=1e-14)
    np.testing.assert_allclose(jax.vmap(f, in_axes=1, out_axes=1)(a), g(a), rtol=1e-14)
    # forward and gradient keep a reduction per materialized value (tangent, cotangent), not fused away
    def reductions(fn):
        return jax.jit(fn).lower(a).compile().as_text().count(" reduce(")

    assert reductions(f) == reductions(g) + 1
    assert reductions(jax.grad(lambda a: jnp.sum(f(a)))) == reductions(jax.grad(lambda a: jnp.sum(g(a)))) + 2


def test_materialize_cotangent_is_the_identity_and_a_reduction_only_in_the_gradient(x64):
    del x64
    a = jax.random.normal(jax.random.key(4), (4, 3), jnp.float64)
    f = lambda a: jnp.sin(materialize_cotangent(a * a)) * a  # noqa: E731
    g = lambda a: jnp.sin(a * a) * a  # noqa: E731
    np.testing.assert_array_equal(f(a), g(a))
    check_grads(f, (a,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(jax.jacfwd(f)(a), jax.jacrev(g)(a), rtol=1e-14)
    np.testing.assert_allclose(jax.jacrev(f)(a), jax.jacrev(g)(a), rtol=1e-14)
    per_row = [jax.vmap(jax.grad(lambda r, fn=fn: jnp.sum(fn(r))))(a) for fn in (f, g)]
    np.testing.assert_allclose(*per_row, rtol=1e-14)

    def reductions(fn):
        return jax.jit(fn).lower(a).compile().as_text().count(" reduce(")

    assert reductions(f) == reductions(g)
    assert reductions(jax.grad(lambda a: jnp.sum(f(a)))) == reductions(jax.grad(lambda a: jnp.sum(g(a)))) + 1


def test_corner_major_incidence_renumbers_every_corner_and_keeps_the_padding():
    table = corner_incidence(ELEMENTS, N)
    major = np.asarray(corner_major_incidence(jnp.asarray(table), *ELEMENTS.shape))
    flat_major = ELEMENTS.T.reshape(-1)
    pad = ELEMENTS.size
    assert ((major == pad) == (table == pad)).all()
    rows, cols = np.nonzero(major < pad)
    assert (flat_major[major[rows, cols]] == cols).all()  # each entry names a corner of its own particle
    assert sorted(major[major < pad].tolist()) == list(range(pad))


@pytest.mark.parametrize("with_table", [False, True])
def test_corner_major_gather_and_sum_equal_the_element_major_ones_with_all_derivatives(x64, with_table):
    del x64
    elements = jnp.asarray(ELEMENTS)
    table = corner_major_incidence(corner_incidence(ELEMENTS, N), *ELEMENTS.shape) if with_table else None
    x = jax.random.normal(jax.random.key(0), (N, 3), jnp.float64)
    f = jax.random.normal(jax.random.key(1), ELEMENTS.shape + (3,), jnp.float64)
    corners = gather_corners_major(x, elements, table)
    assert corners.shape == (3, 4, 3)
    np.testing.assert_array_equal(corners, jnp.swapaxes(gather_corners(x, elements), 0, 1))
    np.testing.assert_allclose(scatter_corners_major(jnp.swapaxes(f, 0, 1), elements, N, table),
                               scatter_corners(f, elements, N), rtol=1e-13)

    def chain(x, f):  # a nonlinear use of both, as a force term makes
        c = unstack(gather_corners_major(x, elements, table))
        return scatter_corners_major(jnp.stack([jnp.sin(c[k]) * f[:, k] for k in range(3)]), elements, N, table)

    def plain(x, f):
        return scatter_corners(jnp.sin(gather_corners(x, elements)) * f, elements, N)

    np.testing.assert_allclose(chain(x, f), plain(x, f), rtol=1e-13)
    check_grads(chain, (x, f), order=2, modes=("fwd", "rev"))
    w = jax.random.normal(jax.random.key(2), (N, 3), jnp.float64)
    grads = [jax.grad(lambda x, f: jnp.sum(w * fn(x, f)), argnums=(0, 1))(x, f) for fn in (chain, plain)]
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    batch = jnp.stack([x, 2 * x, -x])
    np.testing.assert_allclose(jax.vmap(lambda xx: chain(xx, f))(batch), jax.vmap(lambda xx: plain(xx, f))(batch),
                               rtol=1e-13)
