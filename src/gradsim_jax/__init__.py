"""gradsim-jax: differentiable simulation and rendering in JAX.

The handful of names most users need:

    import gradsim_jax as gs
    topology, params, state0 = gs.cloth_grid(20, 10, 0.1, 0.1, fix_left=True).build()
    trajectory = gs.simulate(topology, params, state0, frames=60, substeps=32)

Conventions: SI units, y up, gravity (0, -9.81, 0) m/s^2; positions [n, 3]; quaternions (w, x, y, z);
images [H, W, 4] float RGBA in [0, 1], row 0 at the top; videos [T, H, W, 4].
"""

from gradsim_jax.geometry import Scene, cloth_grid, cloth_mesh, combine, particles, quat_from_axis_angle
from gradsim_jax.physics import (
    Control, Params, SimulationDiverged, State, Topology, check_finite, first_nonfinite, simulate,
)
from gradsim_jax.physics import euler_step as step

__version__ = "0.1.0"

__all__ = [
    "Control", "Params", "Scene", "SimulationDiverged", "State", "Topology", "check_finite", "cloth_grid",
    "cloth_mesh", "combine", "first_nonfinite", "particles", "quat_from_axis_angle", "simulate", "step",
]
