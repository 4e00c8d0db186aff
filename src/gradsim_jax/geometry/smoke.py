"""Host-side builders of smoke (`physics.smoke`) as a `Scene` piece: a grid with its parameters and its initial
smoke (`smoke_grid`), and the masks that place smoke and inflow in it (`disc_mask`, `box_mask`). Combine the
piece with other pieces (one smoke grid per scene) and `build` it as any scene."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.scene import Scene, particles
from gradsim_jax.physics.smoke import SmokeTopology, smoke_params, smoke_state


def disc_mask(shape, centre, radius) -> np.ndarray:
    """[ny, nx] 1.0 in the cells whose centres lie within `radius` of `centre` (both in units of the box's
    width, y up), else 0.

    Args:
        shape: (ny, nx), the grid's cells.
        centre: (x, y), the disc's centre in units of the box's width, y up.
        radius: the disc's radius in units of the box's width.

    Returns:
        [ny, nx] float64 mask, 1.0 inside the disc, else 0.
    """
    ny, nx = shape
    y, x = (np.mgrid[0:ny, 0:nx] + 0.5) / nx
    return (((x - centre[0]) ** 2 + (y - centre[1]) ** 2) <= radius ** 2).astype(np.float64)


def box_mask(shape, lower, upper) -> np.ndarray:
    """[ny, nx] 1.0 in the cells whose centres lie in the box lower <= (x, y) <= upper (in units of the box's
    width, y up), else 0.

    Args:
        shape: (ny, nx), the grid's cells.
        lower: (x, y), the box's lower corner in units of the box's width, y up.
        upper: (x, y), the box's upper corner in units of the box's width, y up.

    Returns:
        [ny, nx] float64 mask, 1.0 inside the box, else 0.
    """
    ny, nx = shape
    y, x = (np.mgrid[0:ny, 0:nx] + 0.5) / nx
    return ((x >= lower[0]) & (x <= upper[0]) & (y >= lower[1]) & (y <= upper[1])).astype(np.float64)


def smoke_grid(cells, *, spacing: float = 1.0, walls: str = "closed", advection: str = "semi-lagrangian",
               solver: str = "cg", tolerance: float = 1e-5, max_iterations: int = 2000, slip: str = "free",
               buoyancy=1.0, dissipation=0.0, vorticity=0.0, inflow_rate=0.0, inflow_mask=None, density=None,
               u=None, v=None) -> Scene:
    """Smoke as a `Scene` piece (no particles): a grid of cells = (ny, nx) cells (one number: square) of `spacing` m (the rest of the
    grid's settings as `physics.smoke.SmokeTopology`), its parameters (`smoke_params`: buoyancy m/s^2 per unit
    density, dissipation 1/s, vorticity confinement, inflow_rate density/s over inflow_mask [ny, nx]) and its
    initial smoke (`smoke_state`: density, u, v [ny, nx]; zeros where not given). ValueError naming the field
    for a bad value. The scene's dtype is applied by `Scene.build`.

    Args:
        cells: (ny, nx) cells, or one int for a square grid.
        spacing: m, the width of one cell.
        walls: "closed" or "periodic" (`physics.smoke.SmokeTopology`).
        advection: "semi-lagrangian" or "maccormack".
        solver: the pressure solve, "cg", or "fft" with periodic walls.
        tolerance: the projection's relative residual (cg), in (0, 1).
        max_iterations: cg's cap on iterations.
        slip: how advection samples the velocity along a closed wall, "free" or "no-slip".
        buoyancy: m/s^2 per unit density (up), scalar or array.
        dissipation: 1/s, the decay rate of the density.
        vorticity: the vorticity confinement eps (dimensionless; 0: none).
        inflow_rate: density per second added where `inflow_mask` is 1.
        inflow_mask: [ny, nx] in [0, 1], where the inflow adds smoke (None: nowhere).
        density: [ny, nx] initial smoke density >= 0 (None: zeros).
        u: [ny, nx] m/s, initial x velocity on the cells' left faces (None: zeros).
        v: [ny, nx] m/s, initial y velocity on the cells' bottom faces (None: zeros).

    Returns:
        A `Scene` piece with no particles and its `smoke` set to (topology, params, state).
    """
    cells = (cells, cells) if isinstance(cells, (int, np.integer)) else tuple(cells)
    topology = SmokeTopology(cells, spacing=spacing, walls=walls, advection=advection, solver=solver,
                             tolerance=tolerance, max_iterations=max_iterations, slip=slip)
    params = smoke_params(topology, buoyancy=buoyancy, dissipation=dissipation, vorticity=vorticity,
                          inflow_rate=inflow_rate, inflow_mask=inflow_mask, dtype=None)
    state = smoke_state(topology, density=density, u=u, v=v, dtype=None)
    return dataclasses.replace(particles(np.zeros((0, 3))), smoke=(topology, params, state))
