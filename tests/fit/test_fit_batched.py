"""Batched fits (`fit_batched`): each member is the `fit` it would be alone, whatever the batching; a member
that diverges is frozen and reported without stopping the others; random restarts escape a local minimum."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gradsim_jax as gs
from gradsim_jax.fit import Bounded, FitDiverged, fit
from gradsim_jax.fit.batched import fit_batched, random_starts
from gradsim_jax.physics import replace_paths


def wavy(p):
    """Several minima in a (sin), one in b; t is a per-member target (a fixed field)."""
    return jnp.sum((jnp.sin(3.0 * p["a"]) - 0.5) ** 2) + (p["b"] - p["t"]) ** 2 + 0.1 * p["a"][0] ** 2


PARAMS = {"a": jnp.array([0.1, 0.2]), "b": jnp.float32(1.0), "t": jnp.float32(2.0)}
BATCH = {"a": jnp.array([[0.1, 0.2], [1.0, -1.0], [0.5, 0.5]]), "t": jnp.array([2.0, 3.0, 4.0])}


@pytest.fixture(scope="module")
def alone():
    """The three members fitted one at a time by `fit`."""
    out = []
    for i in range(3):
        p = dict(PARAMS, a=BATCH["a"][i], t=BATCH["t"][i])
        out.append(fit(wavy, p, free=("a", "b"), steps=15, learning_rate=0.1, progress=False))
    return out


@pytest.mark.parametrize("mode", ["vmap", "map", "sequential"])
def test_each_member_is_its_own_fit(mode, alone):
    r = fit_batched(wavy, PARAMS, batch=BATCH, free=("a", "b"), steps=15, learning_rate=0.1, mode=mode,
                    map_batch_size=2 if mode == "map" else None, progress=False)
    assert r.members == 3 and r.iterations == 15 and not r.diverged.any()
    assert r.history["loss"].shape == (15, 3) and r.history["params"]["a"].shape == (15, 3, 2)
    for i, single in enumerate(alone):
        np.testing.assert_allclose(r.loss[i], single.loss, rtol=1e-5)
        np.testing.assert_allclose(r.member(i)["a"], single.params["a"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r.member(i)["b"], single.params["b"], rtol=1e-5)
        np.testing.assert_allclose(r.history["loss"][:, i], single.history["loss"], rtol=1e-5)
        assert float(r.member(i)["t"]) == float(BATCH["t"][i])  # a batched fixed field stays as given
    assert r.best == int(np.argmin(r.loss))
    assert r.timing["first_s"] > 0 and r.timing["iteration_s"] > 0


def walled(p):
    """Finite while a < wall; beyond it sqrt of a negative number: loss and gradient NaN."""
    return (p["a"] - p["t"]) ** 2 + jnp.sqrt(p["wall"] - p["a"])


def test_a_diverging_member_is_frozen_and_reported():
    params = {"a": jnp.float32(0.0), "t": jnp.float32(1.0), "wall": jnp.float32(3.0)}
    batch = {"t": jnp.array([1.0, 10.0, -1.0])}  # member 1 is pulled through the wall
    kw = dict(free=("a",), optimizer=optax.adam(0.5), steps=12, progress=False)
    r = fit_batched(walled, params, batch=batch, **kw)
    assert r.diverged.tolist() == [False, True, False]
    with pytest.raises(FitDiverged) as e:  # fit_batched freezes a member; `fit` would back off first
        fit(walled, dict(params, t=jnp.float32(10.0)), backoff=0, **kw)
    assert r.diverged_at[1] == e.value.iteration and r.diverged_fields[1] == e.value.fields == ("a",)
    # Frozen at its last finite parameters, as `fit` reports them; the loss there is finite.
    np.testing.assert_allclose(r.member(1)["a"], e.value.params["a"], rtol=1e-6)
    assert np.isfinite(r.loss[1]) and np.isnan(r.history["loss"][e.value.iteration:, 1]).all()
    for i in (0, 2):  # the others go on undisturbed
        single = fit(walled, dict(params, t=batch["t"][i]), **kw)
        np.testing.assert_allclose(r.member(i)["a"], single.params["a"], rtol=1e-5)
    assert r.best in (0, 2)


def test_keys_are_split_per_member_and_reproducible():
    def noisy(p, key):
        return (p["x"] - jax.random.normal(key)) ** 2

    kw = dict(batch={"x": jnp.zeros(4)}, steps=3, uses_key=True, progress=False)
    a = fit_batched(noisy, {"x": jnp.float32(0.0)}, key=jax.random.key(7), **kw)
    b = fit_batched(noisy, {"x": jnp.float32(0.0)}, key=jax.random.key(7), **kw)
    np.testing.assert_array_equal(a.params["x"], b.params["x"])
    assert len(set(np.round(np.asarray(a.params["x"]), 6))) == 4  # same start, different keys


def test_random_starts():
    params = {"k": jnp.float32(10.0), "mu": jnp.float32(0.5), "v": jnp.array([1.0, -2.0, 0.0])}
    tf = {"k": "log", "mu": Bounded(0.0, 1.0)}
    s = random_starts(params, ("k", "mu", "v"), 200, key=jax.random.key(1), spread=4.0, transforms=tf)
    again = random_starts(params, ("k", "mu", "v"), 200, key=jax.random.key(1), spread=4.0, transforms=tf)
    np.testing.assert_array_equal(s["k"], again["k"])
    assert s["k"].shape == (200,) and s["v"].shape == (200, 3)
    assert float(s["k"][0]) == 10.0 and float(s["mu"][0]) == 0.5 and np.all(s["v"][0] == params["v"])
    k = np.log(np.asarray(s["k"]) / 10.0) / np.log(4.0)  # log-uniform: uniform in [-1, 1] here
    assert k.min() >= -1 and k.max() <= 1 and k.min() < -0.8 and k.max() > 0.8 and abs(np.mean(k)) < 0.15
    assert np.all((np.asarray(s["mu"]) > 0) & (np.asarray(s["mu"]) < 1))
    v = np.asarray(s["v"])
    assert np.all(np.abs(v[:, 0] - 1.0) <= 3.0) and np.all(np.abs(v[:, 1] + 2.0) <= 6.0) and np.all(v[:, 2] == 0)
    with pytest.raises(ValueError, match="spread"):
        random_starts(params, ("k",), 3, key=jax.random.key(0), spread=1.0)


def test_bad_input_is_refused_before_compiling():
    with pytest.raises(ValueError, match="same leading member axis"):
        fit_batched(wavy, PARAMS, batch={"a": jnp.zeros((3, 2)), "t": jnp.zeros(2)}, steps=1)
    with pytest.raises(ValueError, match="unknown field"):
        fit_batched(wavy, PARAMS, batch={"c": jnp.zeros(3)}, steps=1)
    with pytest.raises(ValueError, match="unknown mode"):
        fit_batched(wavy, PARAMS, batch=BATCH, mode="pmap", steps=1)
    with pytest.raises(ValueError, match="member shape"):
        fit_batched(wavy, PARAMS, batch={"a": jnp.zeros((3, 5))}, free=("a",), steps=1)
    with pytest.raises(ValueError, match="open interval"):  # one start outside the log transform's domain
        fit_batched(wavy, PARAMS, batch={"b": jnp.array([1.0, -1.0])}, free=("b",), transforms={"b": "log"})


def test_restarts_escape_a_local_minimum_of_a_spring_period():
    """A mass on a spring, filmed for two periods: the trajectory error as a function of the stiffness has a
    minimum at the truth (100 N/m) and others where the oscillation is a period off. Started at 300 N/m,
    one fit stops in the one at about 260 N/m; among 8 starts within a factor 4, the best finds the truth."""
    scene = gs.particles([[0, 0, 0], [0.5, 0, 0]], v=[[0, 0, 0], [1.0, 0, 0]], mass=[0.0, 1.0])
    topology, params, state0 = scene.add_springs([[0, 1]], ke=100.0).build(gravity=(0.0, 0.0, 0.0))

    def positions(ke):
        p = replace_paths(params, {"springs.ke": jnp.reshape(ke, (1,))})
        return gs.simulate(topology, p, state0, frames=40, substeps=4, frame_dt=1 / 30).particles.x[:, 1, 0]

    target = positions(jnp.float32(100.0))

    def loss(p):
        return jnp.mean((positions(p["ke"]) - target) ** 2)

    guess = {"ke": jnp.float32(300.0)}
    starts = random_starts(guess, ("ke",), 8, key=jax.random.key(0), spread=4.0, transforms={"ke": "log"})
    r = fit_batched(loss, guess, batch=starts, transforms={"ke": "log"}, steps=40, learning_rate=0.1, mode="map",
                    progress=False)
    single = float(r.history["final"]["ke"][0])  # member 0 starts at the guess itself: the single fit
    assert 200.0 < single < 300.0 and r.loss[0] > 1e-3
    assert abs(float(r.history["final"]["ke"][r.best]) - 100.0) < 2.0 and r.loss[r.best] < 1e-4


def test_bounds_hold_for_every_member_as_in_fit():
    # Members start on both sides of the minimum at 2.9, with a cliff at 3 and a bound at 2.5 (log space):
    # every member ends at the bound, none tried past the cliff (a NaN would freeze it), as `fit` does.
    def cliff(p):
        return jnp.square(p["a"] - 2.9) + 0.0 * jnp.sqrt(3.0 - p["a"])

    kw = dict(transforms={"a": "log"}, optimizer=optax.adam(0.3), steps=40, progress=False,
              bounds={"a": (None, 2.5)})
    r = fit_batched(cliff, {"a": jnp.float32(1.0)}, batch={"a": jnp.asarray([0.5, 1.0, 2.0, 2.4])}, **kw)
    np.testing.assert_allclose(np.asarray(r.params["a"]), 2.5, rtol=1e-6)
    assert not np.any(np.asarray(r.diverged)) and np.all(np.isfinite(np.asarray(r.loss)))
    single = fit(cliff, {"a": jnp.float32(2.0)}, **kw)
    assert float(single.params["a"]) == pytest.approx(float(r.params["a"][2]), rel=1e-6)
    with pytest.raises(ValueError, match="starts outside its bounds"):
        fit_batched(cliff, {"a": jnp.float32(1.0)}, batch={"a": jnp.asarray([1.0, 2.7])}, **kw)
