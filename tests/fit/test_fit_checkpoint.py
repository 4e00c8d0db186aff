"""Checkpoints: bitwise resume, atomic writes, clear errors for missing, corrupt or foreign files."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gradsim_jax.fit import (
    CheckpointError,
    CheckpointMismatch,
    FitState,
    checkpoint_path,
    content_sha256,
    fit,
    load_checkpoint,
    save_checkpoint,
)

T = jnp.linspace(0.0, 2.0, 40)
TARGET = 1.5 * jnp.exp(-0.7 * T) * jnp.cos(3.0 * T)


def loss_fn(p, key):
    # A random subset of samples per iteration, so the PRNG key matters for the result.
    idx = jax.random.choice(key, T.shape[0], (16,), replace=False)
    pred = p["amp"] * jnp.exp(-p["decay"] * T) * jnp.cos(p["omega"] * T)
    return jnp.mean(jnp.square(pred - TARGET)[idx])


PARAMS = {"amp": jnp.float32(1.0), "decay": jnp.float32(0.3), "omega": jnp.float32(2.6), "offset": jnp.zeros(3)}
OPTIONS = dict(free=("amp", "decay", "omega"), transforms={"amp": "log", "decay": "softplus"},
               optimizer=optax.adam(0.05), clip_norm=10.0, key=jax.random.key(7), uses_key=True, progress=False)


def test_resume_is_bitwise_identical_to_an_uninterrupted_run(tmp_path):
    full = fit(loss_fn, PARAMS, steps=10, **OPTIONS)

    first = fit(loss_fn, PARAMS, steps=6, checkpoint_dir=str(tmp_path), checkpoint_every=3, **OPTIONS)
    assert first.iterations == 6
    resumed = fit(loss_fn, PARAMS, steps=10, checkpoint_dir=str(tmp_path), checkpoint_every=3, resume=True, **OPTIONS)

    assert resumed.iterations == 10
    for name in PARAMS:
        assert np.array_equal(np.asarray(full.params[name]), np.asarray(resumed.params[name])), name
    for a, b in zip(jax.tree_util.tree_leaves(full.state.opt_state), jax.tree_util.tree_leaves(resumed.state.opt_state)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert np.array_equal(jax.random.key_data(full.state.key), jax.random.key_data(resumed.state.key))
    assert full.history["loss"] == resumed.history["loss"]
    assert full.history["iteration"] == resumed.history["iteration"] == list(range(10))
    assert full.loss == resumed.loss
    # The final checkpoint holds iteration 10; no temporary files are left behind.
    assert load_checkpoint(checkpoint_path(str(tmp_path))).state.iteration == 10
    assert os.listdir(tmp_path) == ["checkpoint.npz"]


def test_free_fields_out_of_alphabetical_order_resume(tmp_path):
    """JAX returns dict leaves sorted by key; free=("omega", "amp") must still resume bitwise."""
    options = dict(OPTIONS, free=("omega", "amp", "decay"))
    full = fit(loss_fn, PARAMS, steps=4, **options)
    fit(loss_fn, PARAMS, steps=2, checkpoint_dir=str(tmp_path), checkpoint_every=2, **options)
    resumed = fit(loss_fn, PARAMS, steps=4, checkpoint_dir=str(tmp_path), resume=True, **options)
    for name in ("omega", "amp", "decay"):
        assert np.array_equal(np.asarray(full.params[name]), np.asarray(resumed.params[name])), name
    assert full.history["loss"] == resumed.history["loss"]


def test_checkpoint_is_written_every_n_iterations(tmp_path):
    seen = []

    def callback(it, p, loss, aux):
        if os.path.exists(checkpoint_path(str(tmp_path))):
            seen.append((it, int(load_checkpoint(checkpoint_path(str(tmp_path))).state.iteration)))

    fit(loss_fn, PARAMS, steps=5, checkpoint_dir=str(tmp_path), checkpoint_every=2, callback=callback, **OPTIONS)
    # The state after i updates is written once its loss came out finite (iteration i), before i's callback.
    assert seen == [(2, 2), (3, 2), (4, 4)]
    assert load_checkpoint(checkpoint_path(str(tmp_path))).state.iteration == 5  # final write


def _state(key=None):
    u = {"a": jnp.arange(3, dtype=jnp.float32), "b": jnp.float32(2.0)}
    opt = optax.adam(0.1)
    return FitState(u=u, opt_state=opt.init(u), key=key, iteration=jnp.int32(4))


@pytest.mark.parametrize("key", [None, jax.random.key(1), jax.random.PRNGKey(2)], ids=["none", "typed", "raw"])
def test_save_load_round_trip(tmp_path, key):
    path = str(tmp_path / "c.npz")
    state = _state(key)
    history = {"iteration": [0, 1], "loss": [2.0, 1.5], "params": {"a": [np.zeros(3), np.ones(3)], "b": [1.0, 2.0]}}
    save_checkpoint(path, state, history, extra={"note": "x"})
    ck = load_checkpoint(path, like=state)
    assert ck.extra == {"note": "x"} and ck.path == path and int(ck.state.iteration) == 4
    for a, b in zip(jax.tree_util.tree_leaves(ck.state.opt_state), jax.tree_util.tree_leaves(state.opt_state)):
        assert np.array_equal(a, b)
    assert ck.history["loss"] == [2.0, 1.5] and ck.history["params"]["b"] == [1.0, 2.0]
    assert np.array_equal(ck.history["params"]["a"][1], np.ones(3))
    if key is None:
        assert ck.state.key is None
    else:
        typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
        raw = (lambda k: jax.random.key_data(k)) if typed else (lambda k: k)
        assert np.array_equal(raw(ck.state.key), raw(key))
        # Same key, same bits.
        assert np.array_equal(jax.random.uniform(ck.state.key, (3,)), jax.random.uniform(key, (3,)))
    # Without a template, the optimizer state comes back as its list of leaves.
    assert isinstance(load_checkpoint(path).state.opt_state, list)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        fit(loss_fn, PARAMS, steps=3, checkpoint_dir=str(tmp_path), resume=True, **OPTIONS)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupted_checkpoint_is_a_clear_error(tmp_path, damage):
    path = str(tmp_path / "c.npz")
    save_checkpoint(path, _state())
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write({"truncate": data[: len(data) // 2], "garbage": os.urandom(len(data)), "empty": b""}[damage])
    with pytest.raises(CheckpointError, match="not a readable checkpoint") as e:
        load_checkpoint(path, like=_state())
    assert path in str(e.value)


def test_foreign_npz_is_a_clear_error(tmp_path):
    path = str(tmp_path / "c.npz")
    np.savez(path, x=np.ones(3))
    with pytest.raises(CheckpointError, match="no 'meta' entry"):
        load_checkpoint(path)


def test_checkpoint_of_a_different_problem_is_rejected(tmp_path):
    fit(loss_fn, PARAMS, steps=2, checkpoint_dir=str(tmp_path), **OPTIONS)
    path = checkpoint_path(str(tmp_path))
    options = dict(OPTIONS)

    options["free"] = ("amp", "decay")
    with pytest.raises(CheckpointError, match=r"free fields \['amp', 'decay', 'omega'\]"):
        fit(loss_fn, PARAMS, steps=4, checkpoint_dir=str(tmp_path), resume=True, **options)

    with pytest.raises(CheckpointError, match="'amp' has shape/dtype"):
        fit(loss_fn, {**PARAMS, "amp": jnp.ones(2)}, steps=4, checkpoint_dir=str(tmp_path), resume=True, **OPTIONS)

    options = {**OPTIONS, "optimizer": optax.sgd(0.1)}
    with pytest.raises(CheckpointError, match="optimizer state does not match"):
        fit(loss_fn, PARAMS, steps=4, checkpoint_dir=str(tmp_path), resume=True, **options)

    options = {**OPTIONS, "transforms": {"amp": "softplus", "decay": "softplus"}}
    with pytest.raises(CheckpointError, match="transforms") as e:
        fit(loss_fn, PARAMS, steps=4, checkpoint_dir=str(tmp_path), resume=True, **options)
    assert path in str(e.value)

    options = {**OPTIONS, "key": jax.random.PRNGKey(7)}
    with pytest.raises(CheckpointError, match="checkpoint has a typed PRNG key, this fit has a raw uint32"):
        fit(loss_fn, PARAMS, steps=4, checkpoint_dir=str(tmp_path), resume=True, **options)

    with pytest.raises(CheckpointError, match="past steps=1"):
        fit(loss_fn, PARAMS, steps=1, checkpoint_dir=str(tmp_path), resume=True, **OPTIONS)


def test_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "c.npz")
    save_checkpoint(path, _state())

    def broken_savez(file, **arrays):
        file.write(b"half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, _state()._replace(iteration=jnp.int32(9)))
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["c.npz"]
    assert int(load_checkpoint(path, like=_state()).state.iteration) == 4


def test_metadata_mismatch_is_refused_unless_resume_anyway(tmp_path):
    meta = {"data": content_sha256(np.asarray(TARGET)), "learning_rate": 0.05, "free": ("amp", "decay", "omega")}
    fit(loss_fn, PARAMS, steps=2, checkpoint_dir=str(tmp_path), metadata=meta, **OPTIONS)
    path = checkpoint_path(str(tmp_path))
    assert load_checkpoint(path).extra["metadata"] == {**meta, "free": ["amp", "decay", "omega"]}

    other = {**meta, "data": content_sha256(np.asarray(TARGET) + 1e-7), "learning_rate": 0.1}
    with pytest.raises(CheckpointMismatch) as e:
        fit(loss_fn, PARAMS, steps=4, checkpoint_dir=str(tmp_path), resume=True, metadata=other, **OPTIONS)
    assert list(e.value.differences) == ["data", "learning_rate"]
    assert e.value.differences["learning_rate"] == [0.05, 0.1]
    assert path in str(e.value) and "0.05 in the checkpoint, 0.1 now" in str(e.value)
    assert f"content hash {meta['data'][:12]}" in str(e.value) and "resume_anyway=True" in str(e.value)

    same = fit(loss_fn, PARAMS, steps=3, checkpoint_dir=str(tmp_path), resume=True, metadata=meta, **OPTIONS)
    assert same.resume == {"checkpoint": path, "from_iteration": 2, "checkpoint_inputs": load_checkpoint(path)
                           .extra["metadata"], "differences": {}, "resume_anyway": False}
    forced = fit(loss_fn, PARAMS, steps=4, checkpoint_dir=str(tmp_path), resume=True, metadata=other,
                 resume_anyway=True, **OPTIONS)
    assert forced.iterations == 4 and forced.resume["from_iteration"] == 3
    assert forced.resume["differences"]["learning_rate"] == [0.05, 0.1]
    assert load_checkpoint(path).extra["metadata"]["learning_rate"] == 0.1  # the new checkpoints: the new inputs


def test_checkpoint_without_metadata_resumes_with_a_warning(tmp_path):
    fit(loss_fn, PARAMS, steps=2, checkpoint_dir=str(tmp_path), **OPTIONS)
    with pytest.warns(UserWarning, match="records no inputs"):
        result = fit(loss_fn, PARAMS, steps=3, checkpoint_dir=str(tmp_path), resume=True, metadata={"a": 1},
                     **OPTIONS)
    assert result.resume["checkpoint_inputs"] is None and result.iterations == 3


def test_content_hash_sees_every_bit_and_the_structure():
    x = np.arange(6, dtype=np.float32)
    assert content_sha256(x) == content_sha256(x.copy())
    assert content_sha256(x) != content_sha256(np.nextafter(x, 10))
    assert content_sha256(x) != content_sha256(x.reshape(2, 3)) != content_sha256(x.astype(np.float64))
    assert content_sha256({"a": x}) != content_sha256({"b": x})
