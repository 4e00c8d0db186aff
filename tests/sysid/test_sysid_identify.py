"""Acceptance: mass, membrane stiffness and damping from a 32 x 32 px, 30-frame video of a small cloth.

One experiment (a 3 x 3-cell cloth pinned along one edge, pushed on its free edge during the first frames)
serves every case, so the compiled simulation, renderer and Jacobian are shared: the single-quantity cases
run Levenberg-Marquardt on the pixel residuals with one Jacobian over all three quantities; the joint case
runs the full pipeline (Adam through `fit`, then LM). Starts are 30-50 % off the truth.
"""

import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.scenes.demos import hanging_cloth

ALL = ("mass", "stiffness", "damping")


@pytest.fixture(scope="module")
def recording():
    exp = hanging_cloth(size=32, frames=30, cells=3)
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    assert target.shape == (31, 32, 32, 4)
    return exp, truth, target


# Stiffness alone is slow-marked: the README fit (tests/cli/test_cli_fit.py) recovers it within 1 % in make test.
@pytest.mark.parametrize("name, seed", [pytest.param("mass", 0, marks=pytest.mark.slow), pytest.param("stiffness", 1, marks=pytest.mark.slow),
                                        pytest.param("damping", 2, marks=pytest.mark.slow)])
def test_single_quantity_within_2_percent(recording, name, seed):
    exp, truth, target = recording
    initial = sysid.perturbed(truth, (name,), seed=seed, low=0.3, high=0.5)
    start = sysid.relative_error(name, initial[name], truth[name])
    assert 0.3 <= start <= 0.5
    theta, records = sysid.levenberg_marquardt(exp, target, initial, (name,), steps=25, jac_fields=ALL,
                                               horizons=(10,))
    assert records, "no LM step was accepted"
    err = sysid.relative_error(name, theta[name], truth[name])
    assert err < 0.02, f"{name}: relative error {err:.4f} from a start {start:.2f} off"
    # The quantities that were not free are untouched.
    for other in set(ALL) - {name}:
        assert float(theta[other]) == float(truth[other])


@pytest.mark.slow
def test_joint_with_known_push_recovered_and_identifiable(recording):
    exp, truth, target = recording
    initial = sysid.perturbed(truth, ALL, seed=1, low=0.3, high=0.5)
    config = sysid.FitConfig(free=ALL, iterations=60, polish=15, progress=False)
    result = sysid.identify(exp, target, initial, config)
    for name in ALL:
        start = sysid.relative_error(name, initial[name], truth[name])
        err = sysid.relative_error(name, result.theta[name], truth[name])
        assert 0.3 <= start <= 0.5
        assert err < 0.02, f"{name}: relative error {err:.4f}"
    report = result.report
    assert report is not None and report.identifiable, str(report)
    assert np.isfinite(report.condition_number)
    assert np.all(np.isfinite(report.stderr))


def test_joint_without_push_is_flagged(recording):
    """Under gravity and internal forces alone only stiffness / mass and damping / mass show."""
    exp, truth, _ = recording
    no_push = dict(truth, push=np.zeros_like(np.asarray(truth["push"])))
    _, target = sysid.simulate_video(exp, no_push)
    report = sysid.gauss_newton_report(sysid.make_residual(exp, target), sysid.as_theta(exp, no_push),
                                       free=ALL, transforms=sysid.transforms_for(ALL))
    assert not report.identifiable, str(report)
    combo = report.unidentifiable[0]
    for name in ALL:
        assert f"log({name})" in combo
    assert np.all(np.isinf(report.stderr))


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end run; `make test-all` runs it
def test_rounds_continue_from_a_stall_and_keep_the_best(recording):
    """A round that ends above the noise floor starts another from its estimate (all frames, a fresh
    schedule); each round's history follows the last, and the estimate is the best round's."""
    exp, truth, target = recording
    initial = sysid.perturbed(truth, ("damping",), seed=2, low=0.4, high=0.5)
    config = sysid.FitConfig(free=("damping",), iterations=2, learning_rate=0.05, polish=0, rounds=3,
                             round_iterations=8, progress=False, report=False)
    result = sysid.identify(exp, target, initial, config)
    history = result.history
    assert history["rounds"] >= 2
    assert result.adam_iterations == 2 + 8 * (history["rounds"] - 1)
    assert np.all(np.diff(history["iteration"]) > 0)
    # Round 1's end: its 2 iterations and the state after them.
    first_loss = history["loss"][2]
    assert result.loss < 0.5 * first_loss
    ends = [history["loss"][2 + 9 * k] for k in range(history["rounds"])]
    assert history["best_round"] == 1 + int(np.argmin(ends))
    assert result.loss == min(ends)
    err = sysid.relative_error("damping", result.theta["damping"], truth["damping"])
    start = sysid.relative_error("damping", initial["damping"], truth["damping"])
    assert err < 0.5 * start


def test_rounds_end_at_the_noise_floor(recording):
    exp, truth, target = recording
    config = sysid.FitConfig(free=("damping",), iterations=1, learning_rate=1e-4, polish=0, rounds=4,
                             progress=False, report=False)
    result = sysid.identify(exp, target, dict(truth), config)
    assert result.history["rounds"] == 1 and result.history["best_round"] == 1
    assert result.adam_iterations == 1


def test_rounds_must_be_positive():
    with pytest.raises(ValueError, match="rounds"):
        sysid.check_config(sysid.FitConfig(free=("mass",), rounds=0))
    with pytest.raises(ValueError, match="round_iterations"):
        sysid.check_config(sysid.FitConfig(free=("mass",), round_iterations=0))


def test_a_fit_never_returns_an_estimate_above_its_start(recording):
    """Started at the truth with steps far too long, Adam ends far off with a higher loss than the start's:
    the estimate is the start, with its loss, and the history says so."""
    exp, truth, target = recording
    config = sysid.FitConfig(free=("damping",), iterations=3, learning_rate=1.0, polish=0, progress=False,
                             report=False)
    result = sysid.identify(exp, target, dict(truth), config)
    losses = result.history["loss"]
    assert max(losses[1:]) > 10.0 * losses[0]  # the steps did climb
    assert result.history["kept_start"] and result.history["start_loss"] == losses[0]
    assert float(result.theta["damping"]) == float(truth["damping"])
    assert result.loss == losses[0]
    assert not result.convergence.converged or result.loss <= result.convergence.noise_floor
