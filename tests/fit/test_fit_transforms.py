"""Transforms: round trips, gradients against finite differences (float64), domains, free-field helpers."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from gradsim_jax.fit.transforms import (
    Bounded,
    Identity,
    Log,
    Softplus,
    resolve_free,
    resolve_transform,
    to_physical,
    to_unconstrained,
)

# (transform, physical values inside its domain)
CASES = [
    (Identity(), [-3.0, 0.0, 2.5, 1e4]),
    (Log(), [1e-6, 0.3, 1.0, 7.0, 1e5]),
    (Softplus(), [1e-6, 0.3, 1.0, 7.0, 30.0, 1e5]),
    (Bounded(0.0, 1.0), [1e-4, 0.2, 0.5, 0.9, 0.9999]),
    (Bounded(-2.0, 0.5), [-1.9, -0.3, 0.49]),
]


@dataclasses.dataclass(frozen=True)
class Small:
    mass: jax.Array
    k: jax.Array
    count: jax.Array


jax.tree_util.register_dataclass(Small, data_fields=["mass", "k", "count"], meta_fields=[])


@pytest.mark.parametrize("t,xs", CASES, ids=lambda c: repr(c) if not isinstance(c, list) else "")
def test_round_trip_float64(t, xs):
    with jax.enable_x64(True):
        x = jnp.asarray(xs, jnp.float64)
        u = t.forward(x)
        assert u.dtype == jnp.float64
        np.testing.assert_allclose(t.inverse(u), x, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("t,xs", CASES, ids=lambda c: repr(c) if not isinstance(c, list) else "")
def test_round_trip_float32_keeps_dtype(t, xs):
    x = jnp.asarray(xs, jnp.float32)
    u = t.forward(x)
    assert u.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(u)))
    np.testing.assert_allclose(t.inverse(u), x, rtol=2e-3, atol=1e-6)


@pytest.mark.parametrize("t,xs", CASES, ids=lambda c: repr(c) if not isinstance(c, list) else "")
def test_gradients_match_finite_differences(t, xs):
    with jax.enable_x64(True):
        x = jnp.asarray(xs, jnp.float64)
        # Keep the finite-difference stencil inside the domain: check forward away from the edges.
        interior = x[(x > 1e-3) & (x < 1e3)] if not isinstance(t, Bounded) else x[1:-1]
        check_grads(jax.jit(t.forward), (interior,), order=1, modes=("fwd", "rev"), eps=1e-5)
        check_grads(jax.jit(t.inverse), (t.forward(x),), order=1, modes=("fwd", "rev"), eps=1e-5)


def test_softplus_forward_is_finite_with_finite_gradient_for_large_values():
    x = jnp.asarray([20.0, 100.0, 1e30], jnp.float32)
    u, g = jax.vmap(jax.value_and_grad(Softplus().forward))(x)
    assert bool(jnp.all(jnp.isfinite(u))) and bool(jnp.all(jnp.isfinite(g)))
    np.testing.assert_allclose(Softplus().inverse(u), x, rtol=1e-6)


def test_inverse_maps_everything_into_the_domain():
    u = jnp.asarray([-1e3, -30.0, 0.0, 30.0, 80.0])
    assert bool(jnp.all(Log().inverse(u) >= 0))
    assert bool(jnp.all(Softplus().inverse(u) >= 0))
    b = Bounded(0.2, 0.4).inverse(u)
    assert bool(jnp.all((b >= 0.2) & (b <= 0.4)))


@pytest.mark.parametrize(
    "t,x,match",
    [(Log(), [1.0, -0.5], "open interval"), (Softplus(), [0.0], "open interval"), (Bounded(0, 1), [1.0], "Bounded")],
)
def test_domain_check_names_the_field(t, x, match):
    with pytest.raises(ValueError, match=match) as e:
        t.check_domain("mass", np.asarray(x))
    assert "'mass'" in str(e.value)


def test_resolve_transform_names_and_errors():
    assert resolve_transform("log") == Log()
    assert resolve_transform(None) == Identity()
    assert resolve_transform(Bounded(0, 2)) == Bounded(0, 2)
    with pytest.raises(ValueError, match="unknown transform 'exp'"):
        resolve_transform("exp")
    with pytest.raises(ValueError, match="lo < hi"):
        Bounded(1.0, 1.0)


def test_labels():
    assert Log().label("mass") == "log(mass)"
    assert Identity().label("x0") == "x0"
    assert Bounded(0, 1).label("mu") == "logit(mu)"


@pytest.mark.parametrize("as_dict", [False, True])
def test_free_fields_round_trip_through_the_unconstrained_space(as_dict):
    params = Small(mass=jnp.asarray([1.0, 2.0]), k=jnp.float32(50.0), count=jnp.int32(3))
    if as_dict:
        params = dataclasses.asdict(params)
    tf = resolve_free(params, ("mass", "k"), {"mass": "log"})
    assert list(tf) == ["mass", "k"] and tf["k"] == Identity()
    u = to_unconstrained(params, tf)
    np.testing.assert_allclose(u["mass"], np.log([1.0, 2.0]), rtol=1e-6)
    assert not u["k"].weak_type
    back = to_physical(params, u, tf)
    assert type(back) is type(params)
    get = (lambda p, n: p[n]) if as_dict else getattr
    np.testing.assert_allclose(get(back, "mass"), [1.0, 2.0], rtol=1e-6)
    assert get(back, "count") is get(params, "count")


def test_resolve_free_defaults_and_errors():
    params = {"a": jnp.ones(2), "b": 3.0, "n": jnp.int32(2)}
    assert list(resolve_free(params, None, None)) == ["a", "b"]
    with pytest.raises(ValueError, match=r"unknown parameter field\(s\) \['c'\]"):
        resolve_free(params, ("a", "c"), None)
    with pytest.raises(ValueError, match="floating point"):
        resolve_free(params, ("n",), None)
    with pytest.raises(ValueError, match="'a' must lie"):
        resolve_free({"a": -jnp.ones(2)}, ("a",), {"a": "log"})
    with pytest.raises(TypeError, match="dataclass instance or a dict"):
        resolve_free([1.0], None, None)
