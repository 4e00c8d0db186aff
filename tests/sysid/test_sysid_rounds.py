"""The typed records of a fit's rounds (`sysid.rounds`): `FitHistory` joins entries without changing its inputs
and gives the history dict `SysIdResult.history` has always held; `RoundResult` is frozen."""

import dataclasses

import numpy as np
import pytest

from gradsim_jax.sysid.rounds import FitHistory, RoundResult, record_value


def _adam(first, losses, norms=(1.0, 0.5)):
    n = len(losses)
    return FitHistory(iteration=tuple(range(first, first + n)), loss=tuple(losses),
                      params={"mass": tuple(float(k) for k in range(n))}, stage=("adam",) * n,
                      grad_norm=tuple(norms[:n]), grad_norms={"mass": tuple(norms[:n])}, backoffs=())


def test_an_empty_history_is_the_dict_of_a_fit_with_no_entries():
    h = FitHistory.empty(("mass", "damping"))
    assert h.next_iteration == 0
    assert h.as_dict() == {"iteration": [], "loss": [], "params": {"mass": [], "damping": []}, "stage": []}


def test_joined_entries_follow_each_other_and_leave_their_inputs_unchanged():
    first, later = _adam(0, [3.0, 2.0]), _adam(2, [1.5, 1.0])
    joined = FitHistory.empty(("mass",)).then(first).then(later)
    assert joined.next_iteration == 4
    d = joined.as_dict()
    assert list(d) == ["iteration", "loss", "params", "stage", "grad_norm", "grad_norms", "backoffs"]
    assert d["iteration"] == [0, 1, 2, 3] and d["loss"] == [3.0, 2.0, 1.5, 1.0]
    assert d["params"] == {"mass": [0.0, 1.0, 0.0, 1.0]} and d["grad_norms"] == {"mass": [1.0, 0.5, 1.0, 0.5]}
    assert first.loss == (3.0, 2.0) and later.iteration == (2, 3)  # nothing was changed in place
    with pytest.raises(dataclasses.FrozenInstanceError):
        joined.loss = ()


def test_without_an_adam_stage_the_dict_has_no_gradient_keys():
    lm = FitHistory(iteration=(0, 1), loss=(2.0, 1.0), params={"mass": (1.0, 1.1)}, stage=("lm", "lm"))
    d = FitHistory.empty(("mass",)).then(lm).as_dict()
    assert "grad_norm" not in d and "grad_norms" not in d and "backoffs" not in d
    assert d["stage"] == ["lm", "lm"]
    # A later Adam round adds them after the entries' own keys.
    d = FitHistory.empty(("mass",)).then(lm).then(_adam(2, [0.5])).as_dict()
    assert d["grad_norm"] == [1.0] and d["backoffs"] == []


def test_a_round_result_is_a_frozen_record():
    r = RoundResult(theta={"mass": 1.0}, loss=0.5, info={}, grad_norm=float("nan"), last_step=None,
                    adam_iterations=2, lm_steps=0, resumed=None, start={"mass": 2.0}, start_loss=None,
                    entries=FitHistory.empty(("mass",)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.loss = 0.0


def test_record_value_keeps_small_arrays_and_averages_large_ones():
    assert record_value(np.float32(2.5)) == 2.5 and isinstance(record_value(np.float32(2.5)), float)
    small = np.arange(4.0)
    kept = record_value(small)
    assert np.array_equal(kept, small) and kept is not small
    assert record_value(np.ones(65)) == 1.0
