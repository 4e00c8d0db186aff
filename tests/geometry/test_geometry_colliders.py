"""Colliders on the host side (`geometry.colliders`): `collider` returns a `Scene` piece holding one named,
frozen `Collider` record (and `Keyframes` for a moving one), and `Scene.build` stacks the records into the same
`ColliderParams` arrays, keyframes included."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry import collider, combine, particles
from gradsim_jax.geometry.colliders import Collider
from gradsim_jax.physics.collider_motion import Keyframes, key_arrays


def test_a_collider_piece_holds_a_named_frozen_record():
    piece = collider("capsule", (1.0, 2.0, 3.0), radius=0.2, half_height=0.5, ke=2e3, kd=5.0, kf=7.0, mu=0.3)
    (c,) = piece.colliders
    assert isinstance(c, Collider) and c.kind == "capsule"
    np.testing.assert_array_equal(c.position, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(c.rotation, [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(c.size, [0.2, 0.5, 1.0])
    assert (c.ke, c.kd, c.kf, c.mu) == (2e3, 5.0, 7.0, 0.3)
    assert piece.collider_motion == (None,) and piece.collider_meshes == (None,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.mu = 0.9


def test_a_keyframed_collider_starts_at_its_first_key():
    piece = collider("sphere", radius=0.1, keyframes=[(0.5, (0.0, 1.0, 0.0)), (1.0, (1.0, 1.0, 0.0))])
    (keys,) = piece.collider_motion
    assert isinstance(keys, Keyframes)
    times, positions, rotations = keys  # a named tuple: it unpacks too
    np.testing.assert_array_equal(times, [0.5, 1.0])
    np.testing.assert_array_equal(piece.colliders[0].position, positions[0])
    np.testing.assert_array_equal(piece.colliders[0].rotation, rotations[0])


def test_build_stacks_the_records_into_collider_params():
    still = collider("box", (0.0, -1.0, 0.0), half_extents=(2.0, 0.1, 2.0), mu=0.8)
    moving = collider("sphere", radius=0.3, ke=500.0, keyframes=[(0.0, (0.0, 0.0, 0.0)), (1.0, (0.0, 1.0, 0.0))])
    with jax.enable_x64(True):
        top, params, _ = combine(particles(np.zeros((1, 3))), still, moving).build(dtype=jnp.float64)
    assert top.colliders.kinds == ("box", "sphere")
    col = params.colliders
    np.testing.assert_array_equal(np.asarray(col.position), [[0.0, -1.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(np.asarray(col.size), [[2.0, 0.1, 2.0], [0.3, 1.0, 1.0]])
    np.testing.assert_array_equal(np.asarray(col.ke), [1e3, 500.0])
    np.testing.assert_array_equal(np.asarray(col.mu), [0.8, 0.5])
    np.testing.assert_array_equal(np.asarray(col.key_times), [0.0, 1.0])
    # The static box repeats its pose at every key; the sphere moves.
    np.testing.assert_array_equal(np.asarray(col.key_position), [[[0.0, -1.0, 0.0]] * 2, [[0.0, 0.0, 0.0],
                                                                                           [0.0, 1.0, 0.0]]])


def test_key_arrays_are_empty_when_nothing_moves():
    assert key_arrays(np.zeros((2, 3)), np.tile([1.0, 0.0, 0.0, 0.0], (2, 1)), (None, None)) == {}
    assert key_arrays(np.zeros((1, 3)), np.array([[1.0, 0.0, 0.0, 0.0]]), ()) == {}
