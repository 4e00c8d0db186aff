"""Gauss-Newton identifiability report: ratio-only parameters flagged, separable ones not, Laplace errors."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.fit import identifiability
from gradsim_jax.fit.identifiability import gauss_newton_report

T = jnp.linspace(0.0, 3.0, 50)
NOISE = 0.01 * jax.random.normal(jax.random.key(0), T.shape)


@dataclasses.dataclass(frozen=True)
class Decay:
    amp: jax.Array
    mass: jax.Array
    drag: jax.Array


jax.tree_util.register_dataclass(Decay, data_fields=["amp", "mass", "drag"], meta_fields=[])

SOLUTION = Decay(amp=jnp.float32(1.5), mass=jnp.float32(2.0), drag=jnp.float32(0.8))
LOG = {"amp": "log", "mass": "log", "drag": "log"}


@pytest.mark.parametrize(
    "rate,combination",
    [
        # Scaling mass and drag together leaves drag / mass, hence the data, unchanged.
        (lambda p: p.drag / p.mass, "+0.71 log(mass) +0.71 log(drag)"),
        # Only the product is seen: raising one and lowering the other leaves it unchanged.
        (lambda p: p.drag * p.mass, "+0.71 log(mass) -0.71 log(drag)"),
    ],
    ids=["ratio", "product"],
)
def test_parameters_seen_only_in_combination_are_flagged(rate, combination):
    # x(t) = amp exp(-rate(mass, drag) t)
    target = SOLUTION.amp * jnp.exp(-rate(SOLUTION) * T) + NOISE

    def residual(p):
        return p.amp * jnp.exp(-rate(p) * T) - target

    rep = gauss_newton_report(residual, SOLUTION, ("amp", "mass", "drag"), LOG)
    assert rep.labels == ("log(amp)", "log(mass)", "log(drag)")
    assert not rep.identifiable and rep.unidentifiable == (combination,)
    assert rep.condition_number > 1e6
    assert np.isinf(rep.stderr[1]) and np.isinf(rep.stderr[2]) and np.isfinite(rep.stderr[0])
    assert "not separable by the data" in str(rep) and combination in str(rep)


def test_separable_parameters_are_not_flagged():
    # x(t) = amp exp(-drag t): amplitude and rate each shape the curve differently.
    target = SOLUTION.amp * jnp.exp(-SOLUTION.drag * T) + NOISE

    def residual(p):
        return p.amp * jnp.exp(-p.drag * T) - target

    rep = gauss_newton_report(residual, SOLUTION, ("amp", "drag"), LOG)
    assert rep.identifiable and rep.unidentifiable == ()
    assert np.isfinite(rep.condition_number) and rep.condition_number < 1e3
    assert np.all(np.isfinite(rep.stderr)) and np.all(rep.stderr > 0)
    # log coordinates: the physical error is value * relative error.
    np.testing.assert_allclose(rep.stderr_physical, rep.values * rep.stderr, rtol=1e-5)
    # The noise is 0.01 per sample, so sigma^2 ~ 1e-4.
    assert 0.5e-4 < rep.sigma2 < 2e-4


def test_laplace_errors_match_ordinary_least_squares():
    with jax.enable_x64(True):
        t = jnp.linspace(0.0, 1.0, 30, dtype=jnp.float64)
        y = 2.0 + 0.5 * t + 0.1 * jax.random.normal(jax.random.key(1), t.shape, jnp.float64)
        X = np.stack([np.ones(30), np.asarray(t)], axis=1)
        coef, *_ = np.linalg.lstsq(X, np.asarray(y), rcond=None)
        params = {"c": jnp.asarray(coef)}
        rep = gauss_newton_report(lambda p: p["c"][0] + p["c"][1] * t - y, params)
        resid = X @ coef - np.asarray(y)
        s2 = resid @ resid / (30 - 2)
        np.testing.assert_allclose(rep.sigma2, s2, rtol=1e-10)
        np.testing.assert_allclose(rep.stderr, np.sqrt(s2 * np.diag(np.linalg.inv(X.T @ X))), rtol=1e-8)
        np.testing.assert_allclose(rep.jacobian, X, rtol=1e-12)
        assert rep.labels == ("c[0]", "c[1]")
        assert rep.stderr_physical.tolist() == rep.stderr.tolist()


def test_many_parameters_use_reverse_mode(monkeypatch):
    def no_jacfwd(*args, **kwargs):
        raise AssertionError("jacfwd used for 70 parameters")

    monkeypatch.setattr(identifiability.jax, "jacfwd", no_jacfwd)
    X = jax.random.normal(jax.random.key(2), (100, 70))
    w = jnp.linspace(-1.0, 1.0, 70)
    rep = gauss_newton_report(lambda p: X @ p["w"], {"w": w}, sigma2=1.0)
    np.testing.assert_allclose(rep.jacobian, X, rtol=1e-6)
    assert rep.identifiable and rep.sigma2 == 1.0 and rep.labels[69] == "w[69]"


def test_duplicated_column_in_an_array_field_is_flagged_with_readable_indices():
    X = jnp.stack([T, T, jnp.ones_like(T)], axis=1)  # columns 0 and 1 identical: only w0 + w1 is seen
    rep = gauss_newton_report(lambda p: X @ p["w"] - 1.0, {"w": jnp.ones(3)}, sigma2=1.0)
    assert rep.unidentifiable == ("+0.71 w[0] -0.71 w[1]",)
    assert np.isinf(rep.stderr[:2]).all() and np.isfinite(rep.stderr[2])


@pytest.mark.parametrize("rtol,flagged", [(1e-12, 0), (0.5, 1)])
def test_rtol_sets_the_threshold(rtol, flagged):
    # Two nearly collinear columns: eigenvalue ratio ~ 1e-4.
    X = jnp.stack([T, T + 0.02 * T**2], axis=1)
    rep = gauss_newton_report(lambda p: X @ p["w"], {"w": jnp.ones(2)}, rtol=rtol, sigma2=1.0)
    assert len(rep.unidentifiable) == flagged


def test_a_non_finite_jacobian_gives_an_honest_report_not_an_exception():
    """eigh does not converge on NaN: the report says nothing is known instead of raising, and does not call
    the parameters identifiable."""
    jac = np.array([[1.0, np.nan], [0.5, 2.0], [0.0, 1.0]])
    report = identifiability.report_from_jacobian(jac, np.zeros(3), ("log(a)", "log(b)"), [1.0, 2.0], [1.0, 2.0])
    assert np.isnan(report.condition_number) and not report.identifiable
    assert np.all(np.isnan(report.stderr)) and "not finite" in str(report)
    zero = identifiability.report_from_jacobian(np.zeros((3, 2)), np.zeros(3), ("a", "b"), [1.0, 2.0], [1.0, 1.0])
    assert not zero.identifiable and zero.condition_number == float("inf") and np.all(np.isinf(zero.stderr))


def test_a_quantity_driven_to_zero_keeps_an_unbounded_error_without_a_warning():
    """A positive quantity fitted to 0 (its log or softplus coordinate so low that the transform's slope
    underflows to 0) and unseen by the data: its error is unbounded in physical units too, not 0 x inf = NaN
    (with numpy's "invalid value" warning, as a swing's fit with its bending freed printed)."""
    import warnings

    jac = np.array([[1.0, 0.0], [0.5, 0.0], [0.0, 0.0]])  # the second quantity moves nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = identifiability.report_from_jacobian(jac, np.full(3, 0.1), ("log(a)", "log(b)"), [1.0, 0.0],
                                                      [1.0, 0.0])
    assert report.unidentifiable and np.isinf(report.stderr[1]) and np.isinf(report.stderr_physical[1])
    assert np.isfinite(report.stderr_physical[0]) and report.stderr_physical[0] == report.stderr[0]
