"""Actuators: what a policy drives. Each maps the policy's output vector to the `Control` of one frame.

An actuator consumes `outputs` entries of the policy's output vector (static) and returns a `Control`:

| actuator         | Control field                  | per element       | unit of `scale`   |
|------------------|--------------------------------|-------------------|-------------------|
| `TetActivation`  | `fem.tet_activation` [k]        | tet -> group      | 1 (volume shift)  |
| `TriActivation`  | `cloth.tri_activation` [t]      | triangle -> group | 1 (area shift)    |
| `BendRest`       | `cloth.bend_rest_offset` [e]    | edge -> group     | rad               |
| `ParticleForce`  | `particles.force` [n, 3]        | particle -> group | N                 |

`groups` (int32 data, one entry per element) says which output drives each element, so a few outputs
drive many elements; -1 leaves an element undriven (0). A `ParticleForce` group takes three outputs (x, y,
z). The element's value is `scale * output[group]`. `Actuators((a, b, ...))` splits the output vector
among several in order and merges their Controls (values on the same field add).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.cloth import ClothControl
from gradsim_jax.physics.fem import FemControl
from gradsim_jax.physics.particles import ParticleControl
from gradsim_jax.physics.types import Control
from gradsim_jax.typing import Array, pytree_dataclass


def _groups(count: int, groups, name: str):
    """int32 group indices [count] (default: one group per element) and the number of groups."""
    if groups is None:
        return np.arange(count, dtype=np.int32), count
    g = np.asarray(groups)
    if g.shape != (count,) or not np.issubdtype(g.dtype, np.integer):
        raise ValueError(f"{name}: groups must be {count} integers (one per element), got shape {g.shape} "
                         f"dtype {g.dtype}")
    if g.size and g.min() < -1:
        raise ValueError(f"{name}: groups must be >= -1 (-1: undriven), got {int(g.min())}")
    return g.astype(np.int32), int(g.max()) + 1 if g.size else 0


def _take(values: Array, groups: Array) -> Array:
    """values[groups] along axis 0, 0 where groups == -1."""
    driven = groups >= 0
    picked = values[jnp.where(driven, groups, 0)]
    return jnp.where(driven.reshape(driven.shape + (1,) * (picked.ndim - 1)), picked, 0.0)


def _check_size(actuator, outputs: Array) -> None:
    if outputs.shape[-1] != actuator.outputs:
        raise ValueError(f"{type(actuator).__name__} takes {actuator.outputs} outputs, got {outputs.shape[-1]}")


@pytree_dataclass(meta=("outputs", "scale"))
class TetActivation:
    """Drives `FemControl.tet_activation`: groups [k] int32 (tet -> output, -1 none); outputs (static);
    scale: activation per unit output (a > 0 contracts a tet)."""

    groups: Array
    outputs: int
    scale: float = 1.0

    def control(self, outputs: Array) -> Control:
        """The `Control` of one frame for the policy's outputs: `scale * outputs[group]` on each element.

        Args:
            outputs: [self.outputs] the policy's output vector for this actuator.

        Returns:
            a `Control` setting `fem.tet_activation` [k] (1).
        """
        _check_size(self, outputs)
        return Control(fem=FemControl(tet_activation=self.scale * _take(outputs, self.groups)))


@pytree_dataclass(meta=("outputs", "scale"))
class TriActivation:
    """Drives `ClothControl.tri_activation`: groups [t] int32 (triangle -> output, -1 none); outputs; scale."""

    groups: Array
    outputs: int
    scale: float = 1.0

    def control(self, outputs: Array) -> Control:
        """The `Control` of one frame for the policy's outputs: `scale * outputs[group]` on each element.

        Args:
            outputs: [self.outputs] the policy's output vector for this actuator.

        Returns:
            a `Control` setting `cloth.tri_activation` [t] (1).
        """
        _check_size(self, outputs)
        return Control(cloth=ClothControl(tri_activation=self.scale * _take(outputs, self.groups)))


@pytree_dataclass(meta=("outputs", "scale"))
class BendRest:
    """Drives `ClothControl.bend_rest_offset` (added to `ClothParams.bend_rest`): groups [e] int32 (bending
    edge -> output, -1 none); outputs; scale: rad per unit output."""

    groups: Array
    outputs: int
    scale: float = 1.0

    def control(self, outputs: Array) -> Control:
        """The `Control` of one frame for the policy's outputs: `scale * outputs[group]` on each element.

        Args:
            outputs: [self.outputs] the policy's output vector for this actuator.

        Returns:
            a `Control` setting `cloth.bend_rest_offset` [e] (rad).
        """
        _check_size(self, outputs)
        return Control(cloth=ClothControl(bend_rest_offset=self.scale * _take(outputs, self.groups)))


@pytree_dataclass(meta=("outputs", "scale"))
class ParticleForce:
    """Drives `ParticleControl.force`: groups [n] int32 (particle -> group, -1 none); each group takes three
    outputs (a force x, y, z), so outputs = 3 x groups; scale: N per unit output (each particle of a
    group gets that force)."""

    groups: Array
    outputs: int
    scale: float = 1.0

    def control(self, outputs: Array) -> Control:
        """The `Control` of one frame for the policy's outputs: each particle gets `scale` times its group's three
        outputs (x, y, z).

        Args:
            outputs: [self.outputs] the policy's output vector for this actuator (3 per group).

        Returns:
            a `Control` setting `particles.force` [n, 3] (N).
        """
        _check_size(self, outputs)
        return Control(particles=ParticleControl(force=self.scale * _take(outputs.reshape(-1, 3), self.groups)))


def tet_activation(num_tets: int, groups=None, *, scale: float = 1.0) -> TetActivation:
    """A `TetActivation` for `num_tets` tets; groups [k] ints (None: one output per tet).

    Args:
        num_tets: k, the number of tets.
        groups: [k] ints, the output driving each tet (-1: undriven); None: one output per tet.
        scale: activation per unit output (a > 0 contracts a tet).

    Returns:
        the `TetActivation`, with outputs = the number of groups.
    """
    g, n = _groups(num_tets, groups, "tet_activation")
    return TetActivation(groups=jnp.asarray(g), outputs=n, scale=float(scale))


def tri_activation(num_triangles: int, groups=None, *, scale: float = 1.0) -> TriActivation:
    """A `TriActivation` for `num_triangles` triangles; groups [t] ints (None: one output per triangle).

    Args:
        num_triangles: t, the number of triangles.
        groups: [t] ints, the output driving each triangle (-1: undriven); None: one output per triangle.
        scale: activation (relative area shift) per unit output.

    Returns:
        the `TriActivation`, with outputs = the number of groups.
    """
    g, n = _groups(num_triangles, groups, "tri_activation")
    return TriActivation(groups=jnp.asarray(g), outputs=n, scale=float(scale))


def bend_rest(num_edges: int, groups=None, *, scale: float = 1.0) -> BendRest:
    """A `BendRest` for `num_edges` bending edges; groups [e] ints (None: one output per edge).

    Args:
        num_edges: e, the number of bending edges.
        groups: [e] ints, the output driving each edge (-1: undriven); None: one output per edge.
        scale: rad per unit output.

    Returns:
        the `BendRest`, with outputs = the number of groups.
    """
    g, n = _groups(num_edges, groups, "bend_rest")
    return BendRest(groups=jnp.asarray(g), outputs=n, scale=float(scale))


def particle_force(num_particles: int, groups=None, *, scale: float = 1.0) -> ParticleForce:
    """A `ParticleForce` for `num_particles` particles; groups [n] ints (None: every particle in one group,
    three outputs).

    Args:
        num_particles: n, the number of particles.
        groups: [n] ints, the group of each particle (-1: undriven); None: every particle in group 0.
        scale: N per unit output.

    Returns:
        the `ParticleForce`, with outputs = 3 x the number of groups.
    """
    if groups is None:
        groups = np.zeros(num_particles, np.int32)
    g, n = _groups(num_particles, groups, "particle_force")
    return ParticleForce(groups=jnp.asarray(g), outputs=3 * n, scale=float(scale))


def _merge_branch(a, b):
    if a is None or b is None:
        return b if a is None else a
    values = {}
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        values[f.name] = y if x is None else x if y is None else x + y
    return dataclasses.replace(a, **values)


def merge_controls(*controls: Optional[Control]) -> Optional[Control]:
    """One `Control` holding every given field; fields set by several add.

    Args:
        *controls: `Control`s or None (skipped).

    Returns:
        the merged `Control`, or None when none was given.
    """
    out = None
    for c in controls:
        if c is None:
            continue
        out = c if out is None else Control(**{f.name: _merge_branch(getattr(out, f.name), getattr(c, f.name))
                                               for f in dataclasses.fields(Control)})
    return out


@pytree_dataclass
class Actuators:
    """Several actuators on one output vector: parts (a tuple) take consecutive slices of it, in order."""

    parts: tuple

    @property
    def outputs(self) -> int:
        return sum(p.outputs for p in self.parts)

    def control(self, outputs: Array) -> Control:
        """The `Control` of one frame: each part's Control of its slice of `outputs`, merged (`merge_controls`).

        Args:
            outputs: [self.outputs] the policy's output vector, split among the parts in order.

        Returns:
            the merged `Control`.
        """
        _check_size(self, outputs)
        controls, start = [], 0
        for p in self.parts:
            controls.append(p.control(outputs[start:start + p.outputs]))
            start += p.outputs
        return merge_controls(*controls)
