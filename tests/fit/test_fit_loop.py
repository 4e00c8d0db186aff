"""The fit loop on analytic problems: recovery, compile once, free/fixed fields, guards, history, options."""

import dataclasses
import logging

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tolerances import sum_rtol

from gradsim_jax.fit import FitBackoffWarning, FitDiverged, cosine_schedule, fit


@dataclasses.dataclass(frozen=True)
class Oscillator:
    """x'' = -k x - c x', x(0) = x0, x'(0) = 0."""

    k: jax.Array  # 1/s^2
    c: jax.Array  # 1/s
    x0: jax.Array  # m


jax.tree_util.register_dataclass(Oscillator, data_fields=["k", "c", "x0"], meta_fields=[])


def rollout(p: Oscillator, steps: int = 60, dt: float = 0.05) -> jax.Array:
    """Semi-implicit Euler positions [steps]."""

    def step(s, _):
        x, v = s
        v = v + dt * (-p.k * x - p.c * v)
        x = x + dt * v
        return (x, v), x

    return jax.lax.scan(step, (p.x0, jnp.zeros_like(p.x0)), None, length=steps)[1]


TRUE = Oscillator(k=jnp.float32(4.0), c=jnp.float32(0.3), x0=jnp.float32(1.0))
GUESS = Oscillator(k=jnp.float32(2.5), c=jnp.float32(0.6), x0=jnp.float32(1.0))
TARGET = rollout(TRUE)


def oscillator_loss(p):
    return jnp.mean(jnp.square(rollout(p) - TARGET))


def test_recovers_oscillator_parameters_and_compiles_once():
    traces = []

    def loss(p):
        traces.append(1)  # Python side effect: runs only when JAX traces loss
        return oscillator_loss(p)

    r = fit(loss, GUESS, free=("k", "c"), transforms={"k": "log", "c": "softplus"},
            learning_rate=0.05, steps=250, progress=False)
    assert len(traces) == 1, "the step was traced more than once"
    np.testing.assert_allclose(r.params.k, 4.0, rtol=1e-3)
    np.testing.assert_allclose(r.params.c, 0.3, rtol=1e-2)
    assert r.params.x0 is GUESS.x0  # fixed field passes through untouched
    assert r.iterations == 250 and r.stop_reason == "steps" and not r.converged
    assert r.loss < 1e-7 and r.loss < r.history["loss"][0] * 1e-4
    assert r.wall_time > 0


def test_a_host_schedule_makes_the_updates_of_the_same_schedule_inside_adam():
    steps, lr, alpha = 40, 0.05, 0.02
    inside = fit(oscillator_loss, GUESS, free=("k", "c"), transforms={"k": "log", "c": "softplus"}, steps=steps,
                 optimizer=optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=alpha)), progress=False)
    host = fit(oscillator_loss, GUESS, free=("k", "c"), transforms={"k": "log", "c": "softplus"}, steps=steps,
               optimizer=optax.adam(lr), schedule=cosine_schedule(steps, alpha=alpha), progress=False)
    np.testing.assert_allclose(host.history["loss"], inside.history["loss"], rtol=1e-5)
    np.testing.assert_allclose([host.params.k, host.params.c], [inside.params.k, inside.params.c], rtol=1e-5)
    factor = cosine_schedule(10, alpha=0.1)
    assert factor(0) == 1.0 and abs(factor(5) - 0.55) < 1e-12 and factor(10) == factor(99) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="steps"):
        cosine_schedule(0)
    with pytest.raises(ValueError, match="schedule"):
        fit(oscillator_loss, GUESS, free=("k",), steps=1, schedule=0.5, progress=False)


def test_fits_differing_in_length_schedule_and_bounds_compile_one_program(tmp_path, caplog):
    """The schedule's factors and the bounds are data of the compiled step: a second fit of the same loss with
    other bounds (or none) and a schedule of another length finds the first one's program (here in a fresh
    persistent cache; a `sysid` fit's later rounds and fits from other starts are such fits)."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    old_dir, old_time = jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs
    common = dict(free=("k", "c"), transforms={"k": "log", "c": "softplus"}, optimizer=optax.adam(0.05),
                  progress=False)
    try:
        cc.reset_cache()
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        with caplog.at_level(logging.DEBUG, logger="jax._src.compiler"):
            fit(oscillator_loss, GUESS, steps=3, schedule=cosine_schedule(3), bounds={"k": (1.0, 10.0)}, **common)
            caplog.clear()
            fit(oscillator_loss, GUESS, steps=6, schedule=cosine_schedule(6, alpha=0.1),
                bounds={"k": (0.5, 20.0), "c": (None, 2.0)}, **common)
            fit(oscillator_loss, GUESS, steps=2, **common)
        messages = [r.getMessage() for r in caplog.records if "jit_step" in r.getMessage()]
        assert messages and all("cache hit" in m for m in messages), messages
    finally:
        jax.config.update("jax_compilation_cache_dir", old_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", old_time)
        cc.reset_cache()


def test_least_squares_on_a_dict_with_fixed_fields_never_differentiated():
    t = jnp.linspace(0.0, 1.0, 20)
    y = 2.0 - 3.0 * t + 0.5 * t**2
    backward_traced = []

    @jax.custom_vjp
    def watch(x):
        return x

    def watch_fwd(x):
        return x, None

    def watch_bwd(_, g):
        backward_traced.append(1)
        return (g,)

    watch.defvjp(watch_fwd, watch_bwd)

    def loss(p):
        pred = p["coef"][0] + p["coef"][1] * t + watch(p["curv"]) * t**2
        return jnp.mean(jnp.square(pred - y))

    params = {"coef": jnp.zeros(2), "curv": jnp.float32(0.5)}
    r = fit(loss, params, free=("coef",), optimizer=optax.adam(0.1), steps=400, progress=False)
    np.testing.assert_allclose(r.params["coef"], [2.0, -3.0], atol=2e-3)
    assert r.params["curv"] is params["curv"]
    assert backward_traced == [], "a fixed field was differentiated"
    assert set(r.history["params"]) == {"coef"}


def test_history_records_scalars_small_and_large_arrays():
    params = {"s": jnp.float32(1.0), "small": jnp.ones(3), "big": jnp.full(100, 2.0), "fixed": jnp.ones(2)}

    def loss(p):
        return jnp.sum(jnp.square(p["s"] - 3.0)) + jnp.sum(jnp.square(p["small"])) + jnp.sum(jnp.square(p["big"] - 1.0))

    r = fit(loss, params, free=("s", "small", "big"), transforms={"s": "log", "big": "log"},
            learning_rate=0.1, steps=5, progress=False)
    h = r.history
    assert h["iteration"] == [0, 1, 2, 3, 4] and len(h["loss"]) == 5
    assert all(isinstance(v, float) for v in h["loss"])
    assert all(isinstance(v, float) for v in h["params"]["s"]) and h["params"]["s"][0] == 1.0
    assert all(isinstance(v, np.ndarray) and v.shape == (3,) for v in h["params"]["small"])
    assert all(isinstance(v, float) for v in h["params"]["big"])  # mean of 100 elements
    assert h["params"]["big"][0] == pytest.approx(2.0)
    assert h["final"]["big"].shape == (100,)
    np.testing.assert_array_equal(h["final"]["big"], r.params["big"])
    # Entry i is the value the loss of entry i was evaluated at: loss 0 is the loss of the initial guess.
    # fit's compiled step and this separate evaluation sum the 104 squares in their own orders (tests/tolerances.py).
    assert h["loss"][0] == pytest.approx(float(loss(params)), rel=sum_rtol(104))
    assert r.loss == pytest.approx(float(loss(r.params)), rel=sum_rtol(104))


def test_log_transform_keeps_a_positive_field_positive():
    # The loss pulls m towards -1; in log space m can only approach 0 from above.
    r = fit(lambda p: jnp.square(p["m"] + 1.0), {"m": jnp.float32(1.0)}, transforms={"m": "log"},
            optimizer=optax.sgd(0.5), steps=50, progress=False)
    assert 0.0 < float(r.params["m"]) < 0.1
    assert all(v > 0 for v in r.history["params"]["m"])


def test_clip_norm_bounds_the_update():
    params = {"a": jnp.zeros(4)}
    r = fit(lambda p: 1e6 * jnp.sum(p["a"]), params, optimizer=optax.sgd(1.0), clip_norm=1e-3,
            steps=1, progress=False)
    np.testing.assert_allclose(jnp.linalg.norm(r.params["a"]), 1e-3, rtol=1e-5)


def test_non_finite_loss_raises_with_last_good_params():
    # sqrt(x) with x pushed below 0 by plain SGD: finite for a few iterations, then NaN.
    params = {"x": jnp.float32(1.0), "y": jnp.float32(0.0)}
    with pytest.raises(FitDiverged) as e:
        fit(lambda p: jnp.sqrt(p["x"]) + p["y"] ** 2, params, optimizer=optax.sgd(0.3), steps=50, progress=False,
            backoff=0)
    exc = e.value
    assert exc.iteration >= 1 and exc.last_good_iteration == exc.iteration - 1
    assert "iteration" in str(exc) and "'x'" in str(exc)
    assert "x" in exc.fields and "y" not in exc.fields
    assert float(exc.params["x"]) > 0 and np.isfinite(float(exc.params["x"]))
    assert float(exc.params["x"]) == exc.history["params"]["x"][-1]
    assert len(exc.history["loss"]) == exc.iteration


def cliff(p):
    """(a - 2.9)^2 for a < 3, NaN (loss and gradient) beyond: the minimum lies 0.1 before a cliff."""
    return jnp.square(p["a"] - 2.9) + 0.0 * jnp.sqrt(3.0 - p["a"])


def test_an_update_over_a_cliff_is_redone_at_half_length():
    kw = dict(optimizer=optax.adam(0.5), steps=60, progress=False)
    with pytest.raises(FitDiverged):
        fit(cliff, {"a": jnp.float32(0.1)}, backoff=0, **kw)
    with pytest.warns(FitBackoffWarning, match="redone at 0.5 of its length"):
        r = fit(cliff, {"a": jnp.float32(0.1)}, **kw)
    backoffs = r.history["backoffs"]
    assert 1 <= len(backoffs) <= 4 and backoffs == sorted(backoffs)
    assert abs(float(r.params["a"]) - 2.9) < 1e-2 and np.isfinite(r.loss)
    # Momentum SGD too: without clearing its trace, halved updates would still carry it over the edge.
    r = fit(cliff, {"a": jnp.float32(0.1)}, **dict(kw, optimizer=optax.sgd(0.3, momentum=0.9)))
    assert r.history["backoffs"] and abs(float(r.params["a"]) - 2.9) < 1e-2
    # The history holds only finite iterations, one per update, none of them past the cliff.
    assert len(r.history["loss"]) == 60 and np.all(np.asarray(r.history["params"]["a"]) < 3.0)


def test_a_resume_after_a_back_off_is_bitwise_the_uninterrupted_fit(tmp_path):
    kw = dict(optimizer=optax.adam(0.5), progress=False, checkpoint_every=1)
    with pytest.warns(FitBackoffWarning):
        whole = fit(cliff, {"a": jnp.float32(0.1)}, steps=40, checkpoint_dir=str(tmp_path / "a"), **kw)
    first = whole.history["backoffs"][0]
    with pytest.warns(FitBackoffWarning):
        fit(cliff, {"a": jnp.float32(0.1)}, steps=first + 2, checkpoint_dir=str(tmp_path / "b"), **kw)
    resumed = fit(cliff, {"a": jnp.float32(0.1)}, steps=40, checkpoint_dir=str(tmp_path / "b"), resume=True, **kw)
    assert resumed.history["backoffs"] == whole.history["backoffs"]
    np.testing.assert_array_equal(resumed.params["a"], whole.params["a"])
    assert resumed.history["loss"] == whole.history["loss"]


def test_backoff_must_be_a_non_negative_int():
    with pytest.raises(ValueError, match="backoff"):
        fit(cliff, {"a": jnp.float32(0.1)}, backoff=-1, progress=False)


def test_non_finite_gradient_with_finite_loss_names_the_field():
    params = {"a": jnp.float32(0.0), "b": jnp.float32(1.0)}
    with pytest.raises(FitDiverged, match=r"iteration 0: .*non-finite gradient in field\(s\) 'a'") as e:
        fit(lambda p: jnp.sqrt(jnp.abs(p["a"])) + p["b"] ** 2, params, steps=5, progress=False)
    assert e.value.fields == ("a",) and np.isfinite(e.value.loss)
    assert e.value.last_good_iteration is None and float(e.value.params["b"]) == 1.0


def test_key_is_split_every_iteration_and_reproducible():
    seen = []

    def loss(p, key):
        noise = jax.random.normal(key, ())
        return jnp.square(p["a"] - 1.0) + 0.0 * noise, noise

    def run():
        seen.clear()
        return fit(loss, {"a": jnp.float32(0.0)}, key=jax.random.key(3), uses_key=True, has_aux=True,
                   steps=6, progress=False, callback=lambda it, p, l, aux: seen.append(float(aux)))

    r1 = run()
    first = list(seen)
    r2 = run()
    assert first == seen and len(set(first)) == 6  # a different key every iteration, same bits each run
    np.testing.assert_array_equal(r1.params["a"], r2.params["a"])
    assert r1.aux.shape == () and np.isfinite(float(r1.aux))  # aux of the final evaluation
    assert jax.random.key_data(r1.state.key).tolist() != jax.random.key_data(jax.random.key(3)).tolist()


def test_iteration_is_passed_as_a_traced_value():
    traces, seen = [], []

    def loss(p, iteration):
        traces.append(1)
        return jnp.square(p["a"]), iteration

    fit(loss, {"a": jnp.float32(1.0)}, uses_iteration=True, has_aux=True, steps=4, progress=False,
        callback=lambda it, p, l, aux: seen.append((it, int(aux))))
    assert seen == [(0, 0), (1, 1), (2, 2), (3, 3)] and len(traces) == 1


def test_callback_and_ftol_stop_early():
    r = fit(oscillator_loss, GUESS, free=("k",), transforms={"k": "log"}, steps=100, progress=False,
            callback=lambda it, p, loss, aux: it == 2)
    assert r.stop_reason == "callback" and r.iterations == 3 and len(r.history["loss"]) == 3

    r = fit(lambda p: jnp.square(p["a"] - 2.0), {"a": jnp.float32(0.0)}, optimizer=optax.sgd(0.4),
            steps=1000, ftol=1e-6, patience=3, progress=False)
    assert r.converged and r.stop_reason == "converged" and r.iterations < 100
    np.testing.assert_allclose(r.params["a"], 2.0, rtol=1e-3)


def test_progress_bar_shows_loss(capsys):
    fit(lambda p: jnp.square(p["a"]), {"a": jnp.float32(1.0)}, steps=3, progress=True)
    err = capsys.readouterr().err
    assert "3/3" in err and "loss=" in err and "it/s" in err


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(uses_key=True), "needs an explicit key"),
        (dict(resume=True), "needs checkpoint_dir"),
        (dict(steps=-1), "steps"),
        (dict(checkpoint_every=0), "checkpoint_every"),
        (dict(free=("nope",)), "unknown parameter field"),
        (dict(transforms={"a": "log"}), "'a' must lie"),
    ],
)
def test_bad_arguments_fail_before_compiling(kwargs, match):
    traces = []

    def loss(p):
        traces.append(1)
        return jnp.square(p["a"])

    with pytest.raises(ValueError, match=match):
        fit(loss, {"a": jnp.float32(-1.0)}, progress=False, **kwargs)
    assert traces == []


def test_traced_checks_stop_a_fit_when_a_value_turns_bad():
    """A free mass driven negative inside the compiled step is reported by field and index."""
    import gradsim_jax as gs
    from gradsim_jax.physics import TracedCheckError, validate_traced

    top, par, st = gs.cloth_grid(1, 1, 0.1, 0.1, mass=0.05).build()

    def loss(p):
        return jnp.sum(p.particles.mass)  # gradient descent lowers every mass, through zero (identity transform)

    with pytest.raises(TracedCheckError, match=r"fit iteration 1: Params\.particles\.mass\[0\] = -0\.0[0-9]* is not"):
        gs.fit(loss, par, free=("particles.mass",), learning_rate=0.1, steps=5, progress=False,
               checks=lambda p: validate_traced(top, p, st))
    # Without checks the fit runs to the end with negative masses.
    assert float(gs.fit(loss, par, free=("particles.mass",), learning_rate=0.1, steps=5, progress=False).params.particles.mass[0]) < 0


def test_a_fit_with_checks_traced_twice_is_the_same_program():
    """checkify numbers checks from a process-wide counter; fits number them from a fixed base, so the same
    fit traced again (a resume, the next test) finds its program in the persistent compilation cache."""
    import gradsim_jax as gs
    from gradsim_jax.physics import validate_traced
    from gradsim_jax.physics.checks import deterministic_check_codes

    top, par, st = gs.cloth_grid(1, 1, 0.1, 0.1, mass=0.05).build()

    def program(numbered):
        def f(p):
            if numbered:
                with deterministic_check_codes():
                    return validate_traced(top, p, st)
            return validate_traced(top, p, st)
        return jax.jit(f).lower(par).as_text(debug_info=False)

    assert program(True) == program(True)
    # and a failing check still names its field inside the numbered trace
    bad = dataclasses.replace(par, particles=dataclasses.replace(par.particles, mass=-par.particles.mass))
    with deterministic_check_codes():
        err = jax.jit(lambda p: validate_traced(top, p, st))(bad)
    assert "Params.particles.mass[0]" in err.get()


def test_bounds_stop_updates_at_the_edge_and_let_them_leave_it():
    # The cliff at a = 3 with a bound at 2.5 on a log transform: Adam (lr 0.5) would step over it in a few
    # iterations; bounded, it is never tried past 2.5, sits there while the gradient pushes up, and leaves once
    # the minimum moves below (iteration >= 30: a target of 1).
    def loss(p, it):
        return jnp.square(p["a"] - jnp.where(it < 30, 2.9, 1.0)) + 0.0 * jnp.sqrt(3.0 - p["a"])

    kw = dict(transforms={"a": "log"}, optimizer=optax.adam(0.5), steps=80, progress=False, uses_iteration=True,
              backoff=0)
    with pytest.raises(FitDiverged):
        fit(loss, {"a": jnp.float32(0.5)}, **kw)
    r = fit(loss, {"a": jnp.float32(0.5)}, bounds={"a": (None, 2.5)}, **kw)
    a = np.asarray(r.history["params"]["a"])
    assert a.max() == pytest.approx(2.5, rel=1e-6) and np.count_nonzero(np.isclose(a[:30], 2.5)) > 10
    assert abs(float(r.params["a"]) - 1.0) < 0.1  # Adam at a fixed rate of 0.5 in log space wobbles
    lo = fit(lambda p: jnp.square(p["a"]), {"a": jnp.float32(2.0)}, bounds={"a": (0.5, None)},
             transforms={"a": "log"}, optimizer=optax.adam(0.2), steps=60, progress=False)
    assert float(lo.params["a"]) == pytest.approx(0.5, rel=1e-6)


def test_bounds_are_checked_and_a_resume_needs_the_same_ones(tmp_path):
    from gradsim_jax.fit import CheckpointError

    p = {"a": jnp.float32(1.0), "b": jnp.float32(0.0)}
    loss = lambda q: jnp.square(q["a"] - 2.0) + jnp.square(q["b"])  # noqa: E731
    with pytest.raises(ValueError, match="not a free field"):
        fit(loss, p, free=("a",), bounds={"b": (0.0, 1.0)}, progress=False)
    with pytest.raises(ValueError, match="starts outside its bounds"):
        fit(loss, p, bounds={"a": (None, 0.5)}, progress=False)
    with pytest.raises(ValueError, match="lo < hi"):
        fit(loss, p, bounds={"a": (2.0, 1.0)}, progress=False)
    with pytest.raises(ValueError, match="pair"):
        fit(loss, p, bounds={"a": 1.0}, progress=False)
    fit(loss, p, bounds={"a": (None, 1.5)}, steps=2, checkpoint_dir=str(tmp_path), progress=False)
    with pytest.raises(CheckpointError, match="bounds"):
        fit(loss, p, bounds={"a": (None, 1.6)}, steps=4, checkpoint_dir=str(tmp_path), resume=True, progress=False)
    r = fit(loss, p, bounds={"a": (None, 1.5)}, steps=4, checkpoint_dir=str(tmp_path), resume=True, progress=False)
    assert float(r.params["a"]) <= 1.5
