"""Checkpoint policies of a rollout: what the gradient of `simulate` keeps and what it recomputes.

A policy is a static, hashable strategy passed to `simulate(checkpoint=...)`, a subclass of
`CheckpointPolicy` (the declared extension point); it runs the scan over frames
`run(frame, state0, frames) -> (last_state, trajectory)` and wraps each substep (`substep(step)`), where
`frame(state, index) -> (state, state)` advances one frame (its substeps). Notation: T frames, s substeps
per frame, S the bytes of one State (particles x, v: 24 n bytes in float32), R the bytes the backward pass
of one substep needs (its residuals: gathered element positions, velocities and intermediates; about 10 S
for the demo cloth, 58 KB a step).
Memory of the backward pass, besides the T + 1 states that `simulate` returns in every policy:

| policy            | stores                                                  | memory               | compute  |
|-------------------|---------------------------------------------------------|----------------------|----------|
| `NoCheckpoint`    | every substep's residuals                                | T s R                | 1 fwd    |
| `PerSubstep`      | the state before every substep; one substep's residuals at a time | T s S + R | 2 fwd |
| `PerFrame`        | the state at each frame; one frame's substep states at a time, one substep's residuals | T S + s S + R | 3 fwd |
| `NestedSqrt`      | the state at each segment start (k = ceil(sqrt T) frames each), then one segment's frame states, then one frame's substep states | (T / k + k) S + s S + R ~ 2 sqrt(T) S + s S + R | 4 fwd |

(with `remat_substeps=False`: s R in place of s S + R and one forward pass fewer.)

(compute: forward passes of the physics per gradient, backward pass excluded). `PerFrame` is the default
(`checkpoint=True`); `NestedSqrt` matters when the loss reads only a few frames (then XLA does not keep the
returned trajectory) or when frames are many and substeps few. Griewank & Walther, "Algorithm 799:
revolve" (ACM TOMS 2000) gives the optimal schedules of which the nested sqrt one is the two-level case.

Substeps (`remat_substeps`, default True in `PerFrame` and `NestedSqrt`): when the backward pass replays a
frame it keeps only the state before each substep (s S instead of s R) and recomputes one substep's
residuals at a time, right before differentiating it: one more forward pass of the physics, for a
backward pass that no longer writes and reads some 40 residual arrays per substep. On the 2-core CPU of
the README this made the demo cloth's 2880-step gradient 1.5x faster (0.41 -> 0.28 s), the 128 x 128
cloth's 1.2x (9.3 -> 7.8 ms a step) and halved their compile times; memory is then T S + s S + R.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Callable, Union

import jax
import jax.numpy as jnp


def _remat_substep(step: Callable) -> Callable:
    return jax.checkpoint(step, policy=jax.checkpoint_policies.nothing_saveable)


class CheckpointPolicy(abc.ABC):
    """What `simulate` needs of a checkpoint policy (subclass it as a frozen dataclass: hashable, static)."""

    def substep(self, step: Callable) -> Callable:
        """The substep function as the frame's scan should run it (the base: as it is).

        Args:
            step: `step(state, k) -> (state, None)`, one substep.

        Returns:
            A function of the same signature.
        """
        return step

    @abc.abstractmethod
    def run(self, frame: Callable, state0, frames: int):
        """Scan `frame` over the frame indices 0 .. frames - 1 from `state0`.

        Args:
            frame: `frame(state, index) -> (state, state)`, one frame (its substeps).
            state0: the `State` at frame 0.
            frames: the number of frames (static).

        Returns:
            (the last state, the states after each frame, leaves with a leading axis of length frames).
        """


@dataclasses.dataclass(frozen=True)
class NoCheckpoint(CheckpointPolicy):
    """Keep every substep's residuals: memory T s R, no recomputation."""

    def substep(self, step: Callable) -> Callable:
        """The substep function as the frame's scan should run it: as it is.

        Args:
            step: `step(state, k) -> (state, None)`, one substep.

        Returns:
            A function of the same signature.
        """
        return step

    def run(self, frame: Callable, state0, frames: int):
        """Scan `frame` over the frames (`CheckpointPolicy.run`).

        Args:
            frame: `frame(state, index) -> (state, state)`, one frame.
            state0: the `State` at frame 0.
            frames: the number of frames (static).

        Returns:
            (the last state, the states after each frame).
        """
        return jax.lax.scan(frame, state0, jnp.arange(frames))


@dataclasses.dataclass(frozen=True)
class PerSubstep(CheckpointPolicy):
    """Keep the state before every substep and recompute one substep's residuals at a time: memory T s S + R
    (as an engine that records every state, Warp's tape, needs), one extra forward pass. The fastest
    gradient where T s S fits: the demo cloth's 2880-step gradient 1.25x faster than `PerFrame`'s."""

    def substep(self, step: Callable) -> Callable:
        """The substep function, keeping nothing but its input state.

        Args:
            step: `step(state, k) -> (state, None)`, one substep.

        Returns:
            A function of the same signature.
        """
        return _remat_substep(step)

    def run(self, frame: Callable, state0, frames: int):
        """Scan `frame` over the frames (`CheckpointPolicy.run`).

        Args:
            frame: `frame(state, index) -> (state, state)`, one frame.
            state0: the `State` at frame 0.
            frames: the number of frames (static).

        Returns:
            (the last state, the states after each frame).
        """
        return jax.lax.scan(frame, state0, jnp.arange(frames))


@dataclasses.dataclass(frozen=True)
class PerFrame(CheckpointPolicy):
    """Checkpoint each frame (and, with `remat_substeps`, each substep inside it): memory T S + s S + R, two
    extra forward passes (T S + s R and one without `remat_substeps`)."""

    remat_substeps: bool = True

    def substep(self, step: Callable) -> Callable:
        """The substep function as the frame's scan should run it: keeping nothing but its input state when
        `remat_substeps`.

        Args:
            step: `step(state, k) -> (state, None)`, one substep.

        Returns:
            A function of the same signature.
        """
        return _remat_substep(step) if self.remat_substeps else step

    def run(self, frame: Callable, state0, frames: int):
        """Scan `frame` over the frames (`CheckpointPolicy.run`).

        Args:
            frame: `frame(state, index) -> (state, state)`, one frame.
            state0: the `State` at frame 0.
            frames: the number of frames (static).

        Returns:
            (the last state, the states after each frame).
        """
        return jax.lax.scan(jax.checkpoint(frame), state0, jnp.arange(frames))


@dataclasses.dataclass(frozen=True)
class NestedSqrt(CheckpointPolicy):
    """Checkpoint segments of k = ceil(sqrt(T)) frames (`segment`, if given, overrides k), and each frame
    inside a segment (and each substep inside a frame, `remat_substeps`): memory (T / k + k) S + s S + R,
    three extra forward passes."""

    segment: int | None = None
    remat_substeps: bool = True

    def __post_init__(self):
        if self.segment is not None and (not isinstance(self.segment, int) or self.segment < 1):
            raise ValueError(f"NestedSqrt.segment must be a positive int or None, got {self.segment!r}")

    def substep(self, step: Callable) -> Callable:
        """As `PerFrame.substep`.

        Args:
            step: `step(state, k) -> (state, None)`, one substep.

        Returns:
            A function of the same signature.
        """
        return _remat_substep(step) if self.remat_substeps else step

    def segment_length(self, frames: int) -> int:
        """Frames per segment.

        Args:
            frames: the rollout's number of frames.

        Returns:
            k, the frames of each segment (at most `frames`).
        """
        k = math.isqrt(frames - 1) + 1 if self.segment is None else self.segment  # ceil(sqrt(T))
        return min(k, frames)

    def run(self, frame: Callable, state0, frames: int):
        """Scan `frame` over the frames (`CheckpointPolicy.run`).

        Args:
            frame: `frame(state, index) -> (state, state)`, one frame.
            state0: the `State` at frame 0.
            frames: the number of frames (static).

        Returns:
            (the last state, the states after each frame).
        """
        k = self.segment_length(frames)
        whole, rest = divmod(frames, k)
        per_frame = jax.checkpoint(frame)

        def segment(state, indices):
            return jax.lax.scan(per_frame, state, indices)

        state, traj = jax.lax.scan(jax.checkpoint(segment), state0, jnp.arange(whole * k).reshape(whole, k))
        traj = jax.tree.map(lambda a: a.reshape((whole * k,) + a.shape[2:]), traj)
        if rest:
            state, tail = jax.lax.scan(per_frame, state, jnp.arange(whole * k, frames))
            traj = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), traj, tail)
        return state, traj


CheckpointLike = Union[bool, str, CheckpointPolicy]

_BY_NAME = {"none": NoCheckpoint(), "substep": PerSubstep(), "frame": PerFrame(), "sqrt": NestedSqrt()}


def checkpoint_policy(checkpoint: CheckpointLike) -> CheckpointPolicy:
    """The policy object for `checkpoint`; ValueError for anything else.

    Args:
        checkpoint: True or "frame" (-> PerFrame), False or "none" (-> NoCheckpoint), "substep" (-> PerSubstep),
            "sqrt" (-> NestedSqrt), or a `CheckpointPolicy` (returned as it is).

    Returns:
        The `CheckpointPolicy`.
    """
    if checkpoint is True:
        return PerFrame()
    if checkpoint is False:
        return NoCheckpoint()
    if isinstance(checkpoint, str):
        if checkpoint not in _BY_NAME:
            raise ValueError(f"checkpoint must be one of {sorted(_BY_NAME)}, True, False or a policy object; "
                             f"got {checkpoint!r}")
        return _BY_NAME[checkpoint]
    if isinstance(checkpoint, CheckpointPolicy):
        return checkpoint
    raise ValueError(f"checkpoint must be one of {sorted(_BY_NAME)}, True, False or a policy object; "
                     f"got {checkpoint!r}")
