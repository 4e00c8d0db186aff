"""`fit`'s and `fit_batched`'s option records (`fit.options`) and their flat keyword shorthands."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.fit import fit, fit_batched
from gradsim_jax.fit.options import (BATCHED_SHORTHANDS, FIT_SHORTHANDS, Checkpoints, LossCall, Optimization,
                                     Stopping)


def _loss(p):
    return jnp.sum((p["w"] - 3.0) ** 2)


def test_records_fit_what_the_flat_keywords_fit(tmp_path):
    start = {"w": jnp.asarray([0.5, 1.0])}
    flat = fit(_loss, start, steps=6, learning_rate=0.3, clip_norm=5.0, bounds={"w": (0.0, 2.5)}, ftol=1e-12,
               checkpoint_dir=str(tmp_path / "a"), checkpoint_every=2, progress=False)
    grouped = fit(_loss, start, optimization=Optimization(learning_rate=0.3, clip_norm=5.0, bounds={"w": (0.0, 2.5)}),
                  stopping=Stopping(steps=6, ftol=1e-12), checkpoints=Checkpoints(dir=str(tmp_path / "b"), every=2),
                  progress=False)
    assert np.array_equal(flat.params["w"], grouped.params["w"])
    assert flat.history["loss"] == grouped.history["loss"] and flat.iterations == grouped.iterations == 6


def test_every_shorthand_names_a_field_of_its_record():
    records = {"optimization": Optimization, "stopping": Stopping, "checkpoints": Checkpoints, "loss_call": LossCall}
    for flat, (group, field) in {**FIT_SHORTHANDS, **BATCHED_SHORTHANDS}.items():
        assert field in {f.name for f in dataclasses.fields(records[group])}, flat


def test_unknown_and_doubled_keywords_are_type_errors():
    start = {"w": jnp.asarray(0.5)}
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'stepz'.*steps"):
        fit(_loss, start, stepz=3)
    with pytest.raises(TypeError, match="steps and stopping="):
        fit(_loss, start, stopping=Stopping(steps=3), steps=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'ftol'"):
        fit_batched(_loss, start, batch={"w": jnp.asarray([0.5, 1.0])}, ftol=1e-3)


def test_fit_batched_refuses_what_only_fit_does():
    with pytest.raises(ValueError, match="fit_batched does not take clip, ftol"):
        fit_batched(_loss, {"w": jnp.asarray(0.5)}, batch={"w": jnp.asarray([0.5, 1.0])},
                    optimization=Optimization(clip={"w": 1.0}), stopping=Stopping(ftol=1e-3))


def test_optimization_makes_adam_unless_given_an_optimizer():
    import optax

    sgd = optax.sgd(0.1)
    assert Optimization(optimizer=sgd).transformation() is sgd
    chained = Optimization(clip_norm=1.0).transformation()
    assert chained is not sgd and len(chained.init({"w": jnp.zeros(2)})) == 2
