"""`fit` records each free field's gradient norm per iteration (history, checkpoints, report) and clips
gradients per field."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gradsim_jax.fit import CheckpointError, fit
from gradsim_jax.sysid.outputs.report import gradient_norms
from gradsim_jax.sysid.outputs.summary import summary_lines

TARGET = jnp.asarray([1.0, -2.0, 0.5])


def loss(p):
    """A quadratic with a field of 3 and a scalar: gradients known in closed form."""
    return jnp.sum((p["w"] - TARGET) ** 2) + 10.0 * (p["b"] - 0.3) ** 2


START = {"w": jnp.zeros(3), "b": jnp.asarray(1.0)}


def test_history_holds_per_field_gradient_norms():
    r = fit(loss, START, optimizer=optax.sgd(0.05), steps=4, progress=False)
    norms = r.history["grad_norms"]
    assert set(norms) == {"w", "b"} and all(len(v) == 4 for v in norms.values())
    for i in range(4):  # each iteration's norms are those of the gradient at that iteration's parameters
        p = {"w": jnp.asarray(r.history["params"]["w"][i]), "b": jnp.asarray(r.history["params"]["b"][i])}
        g = jax.grad(loss)(p)
        assert norms["w"][i] == pytest.approx(float(jnp.linalg.norm(g["w"])), rel=1e-5)
        assert norms["b"][i] == pytest.approx(abs(float(g["b"])), rel=1e-5)
        assert r.history["grad_norm"][i] == pytest.approx(np.hypot(norms["w"][i], norms["b"][i]), rel=1e-6)
    report = gradient_norms(r.history)
    assert report["total"] == r.history["grad_norm"] and report["per_quantity"]["b"] == norms["b"]
    lines = summary_lines({"free": [], "gradient_norms": report})
    assert any("gradient norm" in line and "b 14" in line for line in lines), lines


def test_clip_scales_one_field_and_records_the_norm_before_clipping():
    lr = 0.1
    r = fit(loss, START, optimizer=optax.sgd(lr), steps=1, clip={"b": 0.5}, progress=False)
    # b's gradient 20 (b - 0.3) = 14 is clipped to 0.5: b moves by lr * 0.5; w is not clipped.
    assert float(r.params["b"]) == pytest.approx(1.0 - lr * 0.5, rel=1e-6)
    np.testing.assert_allclose(r.params["w"], lr * 2.0 * np.asarray(TARGET), rtol=1e-6)
    assert r.history["grad_norms"]["b"][0] == pytest.approx(14.0, rel=1e-6)


def test_norms_and_clip_survive_checkpoint_and_resume(tmp_path):
    kw = dict(optimizer=optax.sgd(0.05), clip={"w": 1.0}, progress=False)
    whole = fit(loss, START, steps=6, **kw)
    fit(loss, START, steps=3, checkpoint_dir=str(tmp_path), checkpoint_every=3, **kw)
    resumed = fit(loss, START, steps=6, checkpoint_dir=str(tmp_path), resume=True, **kw)
    assert resumed.history["grad_norms"] == whole.history["grad_norms"]
    np.testing.assert_array_equal(resumed.params["w"], whole.params["w"])
    with pytest.raises(CheckpointError, match="clipping"):
        fit(loss, START, steps=6, checkpoint_dir=str(tmp_path), resume=True, optimizer=optax.sgd(0.05),
            clip={"w": 2.0}, progress=False)


@pytest.mark.parametrize("clip, match", [({"nope": 1.0}, "not a free field"), ({"w": 0.0}, "positive"),
                                         ({"w": "big"}, "positive number"), ([1.0], "dict")])
def test_bad_clip_fails_before_compiling(clip, match):
    with pytest.raises(ValueError, match=match):
        fit(loss, START, steps=1, clip=clip, progress=False)


def test_clip_settings_of_the_command_line_and_the_fit_config():
    import argparse

    from gradsim_jax.cli.args import parse_clip
    from gradsim_jax.sysid import FitConfig, check_config

    assert parse_clip("mass=1, tri_ke=0.5") == {"mass": 1.0, "stiffness": 0.5}
    for bad in ("mass", "mass=-1", "nonsense=1", ","):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_clip(bad)
    check_config(FitConfig(free=("mass",), clip={"mass": 1.0}))
    with pytest.raises(ValueError, match="not a free quantity"):
        check_config(FitConfig(free=("mass",), clip={"stiffness": 1.0}))
