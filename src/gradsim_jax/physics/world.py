"""What every body in a scene shares: gravity and the ground plane.

`World` is the `world` branch of `Params`: `gravity [3] m/s^2` (an acceleration, applied to particles
and rigid bodies alike), `ground_height` (m) and `ground_normal [3]` (normalized on use) of the ground
plane, whether or not the scene collides with it (`Topology.ground` says that); `contact_smoothing` (m, static):
the smooth onset of every penalty contact (`physics.contact.contact_depth`; 0, the default: none).
"""

from __future__ import annotations

from gradsim_jax.typing import Array, pytree_dataclass


@pytree_dataclass(meta=("contact_smoothing",))
class World:
    """gravity [3] m/s^2; ground_height m; ground_normal [3] (normalized on use); contact_smoothing m (static)."""

    gravity: Array
    ground_height: Array
    ground_normal: Array
    contact_smoothing: float = 0.0
