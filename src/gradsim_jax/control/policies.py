"""Policies: explicit functions of explicit parameters (a weight matrix, a bias, tanh), no network framework.

gradSim's control experiments drive activations with `tanh(W features + b)`, the features being sinusoids
of time (a central pattern generator) and, optionally, where the body is. Here that is:

    outputs = amplitude * tanh(w h + b),   h = features                       (one layer)
                                           h = tanh(w_hidden features + b_hidden)  (two layers)

Features are dimensionless and of order one: `phase_features` (sin, cos of 2 pi f t, and a constant 1) and
`com_features` (centre of mass of a set of particles relative to a target, divided by a length scale, and
its velocity divided by a velocity scale). `PhasePolicy` is a static description (frequencies, amplitude,
optional state features) that evaluates `policy(params, t, state) -> outputs [outputs]`.

Randomness only through an explicit `jax.random` key (`init_policy`): same key, same weights.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Protocol

import jax
import jax.numpy as jnp

from gradsim_jax.typing import Array, pytree_dataclass


@pytree_dataclass
class PolicyParams:
    """The parameters of a policy, the float tree a fit differentiates.

    w [outputs, inputs] (or [outputs, hidden]), b [outputs]; optional hidden layer w_hidden [hidden, inputs],
    b_hidden [hidden] (None: one layer). All dimensionless (features and outputs are scaled elsewhere).
    """

    w: Array
    b: Array
    w_hidden: Optional[Array] = None
    b_hidden: Optional[Array] = None

    @property
    def num_inputs(self) -> int:
        return (self.w if self.w_hidden is None else self.w_hidden).shape[-1]

    @property
    def num_outputs(self) -> int:
        return self.b.shape[-1]


def init_policy(key: Array, inputs: int, outputs: int, *, scale: float = 0.1, hidden: Optional[int] = None,
                dtype=None) -> PolicyParams:
    """Random initial `PolicyParams`: weights N(0, scale^2 / fan_in), biases 0.

    Args:
        key: a `jax.random` key (the only source of randomness).
        inputs: the number of features.
        outputs: the number of outputs.
        scale: the typical pre-tanh output for features of order one (small: the policy starts near its linear
            regime).
        hidden: the hidden layer's size (None: one layer).
        dtype: the float dtype (None: JAX's default float).

    Returns:
        The `PolicyParams`.
    """
    for name, size in (("inputs", inputs), ("outputs", outputs), ("hidden", hidden)):
        if size is not None and (not isinstance(size, int) or size < 1):
            raise ValueError(f"init_policy needs a positive int {name}, got {size!r}")
    dtype = dtype or jnp.zeros(()).dtype
    if hidden is None:
        w = jax.random.normal(key, (outputs, inputs), dtype) * (scale / math.sqrt(inputs))
        return PolicyParams(w=w, b=jnp.zeros((outputs,), dtype))
    k_hidden, k_out = jax.random.split(key)
    return PolicyParams(
        w=jax.random.normal(k_out, (outputs, hidden), dtype) * (scale / math.sqrt(hidden)),
        b=jnp.zeros((outputs,), dtype),
        w_hidden=jax.random.normal(k_hidden, (hidden, inputs), dtype) * (1.0 / math.sqrt(inputs)),
        b_hidden=jnp.zeros((hidden,), dtype),
    )


def apply_policy(params: PolicyParams, features: Array, amplitude: Array = 1.0) -> Array:
    """amplitude * tanh(w h + b), h = features, or tanh(w_hidden features + b_hidden) with a hidden layer.
    Leading batch axes: vmap.

    Args:
        params: the `PolicyParams`.
        features: [inputs], dimensionless.
        amplitude: the outputs' bound (in the actuator's units per unit output).

    Returns:
        [outputs].
    """
    h = features if params.w_hidden is None else jnp.tanh(params.w_hidden @ features + params.b_hidden)
    return amplitude * jnp.tanh(params.w @ h + params.b)


def phase_features(t: Array, frequencies, *, constant: bool = True) -> Array:
    """[sin(2 pi f_i t) for each f_i, cos(2 pi f_i t) for each f_i, 1], dimensionless. The constant 1 lets a
    bias-free policy hold a steady output; the result has t's float dtype (or the default float).

    Args:
        t: () s, the time (traced).
        frequencies: [m] Hz (a tuple or an array).
        constant: append the constant 1.

    Returns:
        [2 m (+ 1)].
    """
    f = jnp.asarray(frequencies, jnp.result_type(t, float))
    angle = 2.0 * jnp.pi * f * t
    parts = [jnp.sin(angle), jnp.cos(angle)]
    if constant:
        parts.append(jnp.ones((1,), angle.dtype))
    return jnp.concatenate(parts)


def com_features(x: Array, v: Array, particles: Array, target: Array, *, length_scale: float = 1.0,
                 velocity_scale: float = 1.0) -> Array:
    """[(com(x) - target) / length_scale, com(v) / velocity_scale], dimensionless.

    Args:
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        particles: [m] int, indices of the set (unweighted mean).
        target: [3] m.
        length_scale: m.
        velocity_scale: m/s.

    Returns:
        [6].
    """
    com = jnp.mean(x[particles], axis=0)
    vel = jnp.mean(v[particles], axis=0)
    return jnp.concatenate([(com - jnp.asarray(target, com.dtype)) / length_scale, vel / velocity_scale])


@dataclasses.dataclass(frozen=True)
class ComFeatures:
    """State features of a `PhasePolicy` (static): the centre of mass of `particles` (tuple of indices)
    relative to `target` (m) over `length_scale` (m), and its velocity over `velocity_scale` (m/s)."""

    particles: tuple[int, ...]
    target: tuple[float, float, float] = (0.0, 0.0, 0.0)
    length_scale: float = 1.0
    velocity_scale: float = 1.0

    size = 6

    def __call__(self, state) -> Array:
        x, v = state.particles.x, state.particles.v
        return com_features(x, v, jnp.asarray(self.particles, jnp.int32), self.target,
                            length_scale=self.length_scale, velocity_scale=self.velocity_scale)


class Policy(Protocol):
    """What `control.rollout.simulate_policy` calls once a frame: a plain function qualifies, as does `PhasePolicy`."""

    def __call__(self, params, t: Array, state) -> Array:
        """The policy's outputs at time t in `state`.

        Args:
            params: the policy's parameters (a pytree, e.g. `PolicyParams`), what training differentiates.
            t: () s, the time at the start of the frame (traced).
            state: the `physics.types.State` at the start of the frame.

        Returns:
            [outputs], in the actuator's units per unit output.
        """
        ...


@dataclasses.dataclass(frozen=True)
class PhasePolicy(Policy):
    """A policy of time (and optionally of the state), static and hashable.

    frequencies: Hz of the sinusoid features; amplitude: the outputs' bound (|output| <= amplitude, in
    the actuator's units per unit output); com: optional `ComFeatures`; constant: add the feature 1.
    `policy(params, t, state) -> [outputs]`; `num_inputs` is the feature count `init_policy` needs.
    """

    frequencies: tuple[float, ...] = (1.0,)
    amplitude: float = 1.0
    com: Optional[ComFeatures] = None
    constant: bool = True

    @property
    def num_inputs(self) -> int:
        return 2 * len(self.frequencies) + int(self.constant) + (0 if self.com is None else self.com.size)

    def features(self, t: Array, state) -> Array:
        """The feature vector at time t and `state`.

        Args:
            t: () s, the time.
            state: the `physics.types.State` (read when `com` is given).

        Returns:
            [num_inputs].
        """
        h = phase_features(t, self.frequencies, constant=self.constant)
        if self.com is not None:
            h = jnp.concatenate([h, self.com(state).astype(h.dtype)])
        return h

    def __call__(self, params: PolicyParams, t: Array, state) -> Array:
        return apply_policy(params, self.features(t, state).astype(params.w.dtype), self.amplitude)
