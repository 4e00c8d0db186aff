"""2-D incompressible smoke on a staggered (MAC) grid: gradSim's demo_smoke2d solver, differentiable.

Conventions. A grid of ny x nx square cells of side h m, y up: cell (j, i) has its centre at ((i + 1/2) h,
(j + 1/2) h). Velocities live on the faces (Harlow and Welch 1965): u [ny, nx] m/s is the x velocity on the
left face of each cell, at (i h, (j + 1/2) h); v [ny, nx] m/s the y velocity on its bottom face, at
((i + 1/2) h, j h). The density d [ny, nx] (smoke per unit area, any unit) lives at the centres.

Walls (`SmokeTopology.walls`): "closed" (solid walls on all four sides: u[:, 0] = v[0, :] = 0, and the faces
past the last column and row are walls too, held at zero) or "periodic" (the grid wraps both ways).

One step of dt s (after Stam 1999, "Stable Fluids", and Bridson's "Fluid Simulation" notes):

1. the density is advected by the velocity, then dissipates, d <- d exp(-dissipation dt), and the inflow adds
   dt inflow_rate inflow_mask;
2. the velocity is advected by itself, then buoyancy pushes it up: v += dt buoyancy d (the density averaged
   onto each bottom face), and vorticity confinement (Fedkiw, Stam and Jensen 2001) adds
   eps h (N x omega) with N = grad|omega| / |grad|omega||;
3. the pressure projection makes it divergence-free: phi solves L phi = div u (L the MAC grid's Laplacian,
   no flux through closed walls), and u <- u - grad phi. The solve is matrix-free conjugate gradients to a
   relative residual `tolerance` (closed walls), or exact by FFT (periodic walls). Its adjoint is a solve
   too: the conjugate gradients sit inside `jax.lax.custom_linear_solve`, so differentiating the step never
   backpropagates through solver iterations; the FFT solve is a linear map that autodiff transposes exactly.
   Since the residual of that solve is the divergence of the projected velocity, |div u| after projection
   is at most `tolerance` times its value before it (2-norm over the grid).

Advection is semi-Lagrangian (each sample point traced back along the velocity for dt, one Euler step, the
field interpolated bilinearly there; a closed box clamps the traced point to the box) or MacCormack
(Selle et al. 2008: a forward and a backward semi-Lagrangian pass, half the round trip's error taken off,
clamped to the values the forward pass interpolated between, so no new extrema). Those are the grid values of
nonzero weight: a point traced past the outermost samples towards a closed wall is clamped to them alone.
(PhiFlow 3.4 clamps face values half a cell off and does not converge there: docs/concepts/smoke.md, "MacCormack
at walls".)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_normalize
from gradsim_jax.physics.smoke_grid import extended_faces, project, with_walls
from gradsim_jax.typing import pytree_dataclass


Array = Any


WALLS = ("closed", "periodic")


SLIP = ("free", "no-slip")


ADVECTION = ("semi-lagrangian", "maccormack")


SOLVERS = ("cg", "fft")


#: Offsets (in cells) of each field's sample points from the grid origin: (x, y).
_U, _V, _D = (0.0, 0.5), (0.5, 0.0), (0.5, 0.5)


@dataclasses.dataclass(frozen=True)
class SmokeTopology:
    """The grid (static, hashable): shape (ny, nx) cells, spacing h m, walls ("closed" or "periodic"),
    advection ("semi-lagrangian" or "maccormack"), solver ("cg", or "fft" with periodic walls), tolerance
    (the projection's relative residual, cg), max_iterations (cg's cap), and slip: how advection samples the
    velocity along a closed wall, "free" (the tangential velocity extrapolated constant past the wall: the fluid
    slides along it, as in Bridson's notes) or "no-slip" (zero past the wall, PhiFlow's ZERO extrapolation:
    half the nearest row's value at the wall)."""

    shape: tuple
    spacing: float = 1.0
    walls: str = "closed"
    advection: str = "semi-lagrangian"
    solver: str = "cg"
    tolerance: float = 1e-5
    max_iterations: int = 2000
    slip: str = "free"

    def __post_init__(self):
        shape = tuple(self.shape)
        if (len(shape) != 2 or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in shape)
                or min(shape) < 2):
            raise ValueError(f"SmokeTopology.shape must be two whole numbers >= 2 (ny, nx cells), got {self.shape!r}")
        object.__setattr__(self, "shape", (int(shape[0]), int(shape[1])))
        if not (isinstance(self.spacing, (int, float)) and math.isfinite(self.spacing) and self.spacing > 0):
            raise ValueError(f"SmokeTopology.spacing must be a positive length in m, got {self.spacing!r}")
        for name, allowed in (("walls", WALLS), ("advection", ADVECTION), ("solver", SOLVERS), ("slip", SLIP)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"SmokeTopology.{name} must be one of {', '.join(allowed)}, got "
                                 f"{getattr(self, name)!r}")
        if self.solver == "fft" and self.walls != "periodic":
            raise ValueError("SmokeTopology.solver 'fft' needs periodic walls; closed walls take 'cg'")
        if not (0.0 < self.tolerance < 1.0):
            raise ValueError(f"SmokeTopology.tolerance must be in (0, 1), got {self.tolerance!r}")
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise ValueError(f"SmokeTopology.max_iterations must be a whole number >= 1, got {self.max_iterations!r}")


@pytree_dataclass
class SmokeParams:
    """buoyancy (m/s^2 per unit density, up), dissipation (1/s), vorticity (confinement eps, 1), inflow_rate
    (density per second), inflow_mask [ny, nx] (where the inflow adds smoke, 0..1): scalars or arrays."""

    buoyancy: Array
    dissipation: Array
    vorticity: Array
    inflow_rate: Array
    inflow_mask: Array


@pytree_dataclass
class SmokeState:
    """u [ny, nx] m/s (x velocity, left faces), v [ny, nx] m/s (y velocity, bottom faces), density [ny, nx]."""

    u: Array
    v: Array
    density: Array


def smoke_params(topology: SmokeTopology, *, buoyancy=1.0, dissipation=0.0, vorticity=0.0, inflow_rate=0.0,
                 inflow_mask=None, dtype=jnp.float32) -> SmokeParams:
    """SmokeParams with every value checked (ValueError naming the field) and in `dtype` (None: host float64).
    Args:
        topology: the grid (`SmokeTopology`): inflow_mask must have its shape (ny, nx).
        buoyancy: m/s^2 per unit density, the upward acceleration: a scalar or [ny, nx].
        dissipation: 1/s, >= 0, the density's decay rate: a scalar or [ny, nx].
        vorticity: >= 0, dimensionless, the confinement eps: a scalar or [ny, nx].
        inflow_rate: density per second, >= 0: a scalar or [ny, nx].
        inflow_mask: [ny, nx] in [0, 1], where the inflow adds smoke; None: nowhere.
        dtype: the leaves' dtype; None: host float64 arrays."""
    mask = np.zeros(topology.shape) if inflow_mask is None else np.asarray(inflow_mask, np.float64)
    if mask.shape != topology.shape:
        raise ValueError(f"SmokeParams.inflow_mask must have the grid's shape {topology.shape}, got {mask.shape}")
    values = {"buoyancy": buoyancy, "dissipation": dissipation, "vorticity": vorticity, "inflow_rate": inflow_rate}
    for name, value in {**values, "inflow_mask": mask}.items():
        a = np.asarray(value, np.float64)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"SmokeParams.{name} must be finite, got {value!r}" if a.ndim == 0 else
                             f"SmokeParams.{name} has a value that is not finite")
    for name in ("dissipation", "vorticity", "inflow_rate"):
        if np.any(np.asarray(values[name]) < 0):
            raise ValueError(f"SmokeParams.{name} must be >= 0, got {values[name]!r}")
    if np.any(mask < 0) or np.any(mask > 1):
        raise ValueError("SmokeParams.inflow_mask must lie in [0, 1]")
    conv = _converter(dtype)
    return SmokeParams(**{k: conv(v) for k, v in values.items()}, inflow_mask=conv(mask))


def smoke_state(topology: SmokeTopology, *, density=None, u=None, v=None, dtype=jnp.float32) -> SmokeState:
    """A SmokeState (zeros where not given), checked: every field of the grid's shape and finite, the density
    >= 0, no flow through closed walls; in `dtype` (None: host float64).
    Args:
        topology: the grid (`SmokeTopology`): its shape (ny, nx) and walls (closed: u[:, 0] = v[0, :] = 0).
        density: [ny, nx] >= 0, smoke per unit area at the cell centres; None: zeros.
        u: [ny, nx] m/s, the x velocity on the cells' left faces; None: zeros.
        v: [ny, nx] m/s, the y velocity on the cells' bottom faces; None: zeros.
        dtype: the leaves' dtype; None: host float64 arrays."""
    out = {}
    for name, value in (("u", u), ("v", v), ("density", density)):
        a = np.zeros(topology.shape) if value is None else np.array(value, np.float64)
        if a.shape != topology.shape:
            raise ValueError(f"SmokeState.{name} must have the grid's shape {topology.shape}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            j, i = (int(k) for k in np.argwhere(~np.isfinite(a))[0])
            raise ValueError(f"SmokeState.{name}[{j}, {i}] = {a[j, i]} is not finite")
        out[name] = a
    if np.any(out["density"] < 0):
        j, i = (int(k) for k in np.argwhere(out["density"] < 0)[0])
        raise ValueError(f"SmokeState.density[{j}, {i}] = {out['density'][j, i]} is negative")
    if topology.walls == "closed":
        out["u"][:, 0] = 0.0
        out["v"][0, :] = 0.0
    conv = _converter(dtype)
    return SmokeState(**{k: conv(a) for k, a in out.items()})


def _converter(dtype):
    """Leaves as device arrays of `dtype`, or (None) as host float64 arrays (`geometry.smoke`'s Scene pieces)."""
    return (lambda a: np.asarray(a, np.float64)) if dtype is None else (lambda a: jnp.asarray(a, dtype))


def validate_smoke(topology: SmokeTopology, params: SmokeParams, state: SmokeState) -> None:
    """ValueError or TypeError naming the field for a smoke branch that does not fit its grid (a field of another
    shape, a parameter that does not broadcast to it); on concrete values also for NaN, negative density or
    negative rates (`smoke_params`, `smoke_state`). Traced values: shapes only.
    Args:
        topology: the grid (a `SmokeTopology`, else TypeError).
        params: its `SmokeParams`: each leaf a scalar or broadcasting to the grid's shape (ny, nx).
        state: its `SmokeState`: u, v and density [ny, nx]."""
    if not isinstance(topology, SmokeTopology):
        raise TypeError(f"Topology.smoke must be a SmokeTopology, got {type(topology).__name__}")
    if not isinstance(params, SmokeParams):
        raise TypeError(f"Params.smoke must be a SmokeParams (physics.smoke.smoke_params), got {type(params).__name__}")
    if not isinstance(state, SmokeState):
        raise TypeError(f"State.smoke must be a SmokeState (physics.smoke.smoke_state), got {type(state).__name__}")
    for name in ("u", "v", "density"):
        if np.shape(getattr(state, name)) != topology.shape:
            raise ValueError(f"State.smoke.{name} has shape {np.shape(getattr(state, name))}, the grid "
                             f"{topology.shape}")
    for f in dataclasses.fields(params):
        shape = np.shape(getattr(params, f.name))
        try:
            np.broadcast_shapes(shape, topology.shape)
        except ValueError:
            raise ValueError(f"Params.smoke.{f.name} has shape {shape}: it must be a scalar or broadcast to the grid "
                             f"{topology.shape}") from None
    leaves = jax.tree.leaves((params, state))
    if any(isinstance(a, jax.core.Tracer) for a in leaves):
        return
    values = {f.name: np.asarray(getattr(params, f.name), np.float64) for f in dataclasses.fields(params)}
    values["inflow_mask"] = np.broadcast_to(values["inflow_mask"], topology.shape)
    smoke_params(topology, **values, dtype=None)
    smoke_state(topology, **{name: np.asarray(getattr(state, name)) for name in ("u", "v", "density")}, dtype=None)


def with_smoke(topology, params, state, smoke_topology: SmokeTopology, smoke_params_: SmokeParams,
               smoke_state_: SmokeState):
    """(topology, params, state) (`physics.types` trees) with a smoke branch added, its leaves in the scene's
    float dtype (that of state.particles.x), checked (`validate_smoke`).
    Args:
        topology: the scene's `Topology` (`physics.types`), given the branch `smoke_topology`.
        params: the scene's `Params`, given the branch `smoke_params_`.
        state: the scene's `State`, given the branch `smoke_state_`; its particles' x sets the float dtype.
        smoke_topology: the grid (`SmokeTopology`).
        smoke_params_: the smoke's `SmokeParams` (`smoke_params`).
        smoke_state_: the smoke's `SmokeState` (`smoke_state`)."""
    dtype = jnp.result_type(state.particles.x)
    smoke_params_, smoke_state_ = jax.tree.map(lambda a: jnp.asarray(a, dtype), (smoke_params_, smoke_state_))
    validate_smoke(smoke_topology, smoke_params_, smoke_state_)
    return (dataclasses.replace(topology, smoke=smoke_topology), dataclasses.replace(params, smoke=smoke_params_),
            dataclasses.replace(state, smoke=smoke_state_))


def _sample(field, gx, gy, closed: bool, with_range: bool = False):
    """Bilinear samples of `field` [Ny, Nx] at fractional indices (gx, gy) (any shape), clamped to the array
    (closed) or wrapped (periodic); with_range: also the min and max of the values interpolated, i.e. of the
    corners whose weight is not zero (`_weighted_range`)."""
    ny, nx = field.shape
    if closed:
        gx, gy = jnp.clip(gx, 0.0, nx - 1.0), jnp.clip(gy, 0.0, ny - 1.0)
        i0 = jnp.clip(jnp.floor(gx), 0, nx - 2).astype(jnp.int32)
        j0 = jnp.clip(jnp.floor(gy), 0, ny - 2).astype(jnp.int32)
        fx, fy = gx - i0, gy - j0
        i1, j1 = i0 + 1, j0 + 1
    else:
        fi, fj = jnp.floor(gx), jnp.floor(gy)
        fx, fy = gx - fi, gy - fj
        i0, j0 = jnp.mod(fi, nx).astype(jnp.int32), jnp.mod(fj, ny).astype(jnp.int32)
        i1, j1 = jnp.mod(i0 + 1, nx), jnp.mod(j0 + 1, ny)
    a, b, c, d = field[j0, i0], field[j0, i1], field[j1, i0], field[j1, i1]
    value = (1 - fy) * ((1 - fx) * a + fx * b) + fy * ((1 - fx) * c + fx * d)
    if not with_range:
        return value
    return (value,) + _weighted_range(a, b, c, d, fx, fy)


def _weighted_range(a, b, c, d, fx, fy):
    """(min, max) of the corners a (0, 0), b (1, 0), c (0, 1), d (1, 1) that carry weight at fractions (fx, fy).
    A point on a cell's edge (fx or fy 0 or 1: every point traced past the outermost samples towards a closed
    wall, and any point that a zero velocity component leaves on a grid line) gives two corners weight 0; they
    take their neighbours' values, so that MacCormack's clamp stays within the values the sample was
    interpolated from."""
    a, b = jnp.where(fx < 1, a, b), jnp.where(fx > 0, b, a)
    c, d = jnp.where(fx < 1, c, d), jnp.where(fx > 0, d, c)
    a, c = jnp.where(fy < 1, a, c), jnp.where(fy > 0, c, a)
    b, d = jnp.where(fy < 1, b, d), jnp.where(fy > 0, d, b)
    return jnp.minimum(jnp.minimum(a, b), jnp.minimum(c, d)), jnp.maximum(jnp.maximum(a, b), jnp.maximum(c, d))


def _points(shape, offset):
    """Sample points (x, y) [ny, nx] in cells of a field with `offset`."""
    ny, nx = shape
    y, x = jnp.meshgrid(jnp.arange(ny), jnp.arange(nx), indexing="ij")
    return x + offset[0], y + offset[1]


def _sampled(topology: SmokeTopology, field, offset):
    """(the array bilinear sampling reads for `field` at `offset`, the index shift (sx, sy) of a point): a
    closed box's face fields gain their far wall (zeros) and, with no slip, a row (u) or column (v) of zeros
    past each wall along it; the sample point (x, y) in cells reads index (x - offset_x + sx, y - offset_y + sy)."""
    if topology.walls != "closed" or offset == _D:
        return field, (0, 0)
    axis = 1 if offset == _U else 0
    field = extended_faces(field, axis, True)
    if topology.slip == "free":
        return field, (0, 0)
    zeros = jnp.zeros_like(jnp.take(field, jnp.array([0]), axis=1 - axis))
    field = jnp.concatenate([zeros, field, zeros], axis=1 - axis)
    return field, ((0, 1) if offset == _U else (1, 0))


def _sample_at(topology: SmokeTopology, field, offset, x, y, with_range: bool = False):
    """`field` (sampled at `offset`) interpolated at points (x, y) in cells, by the walls' rules (`_sampled`)."""
    source, (sx, sy) = _sampled(topology, field, offset)
    return _sample(source, x - offset[0] + sx, y - offset[1] + sy, topology.walls == "closed", with_range)


def velocity_at(topology: SmokeTopology, state: SmokeState, x, y):
    """(u, v) m/s interpolated at points (x, y) given in cells, each of the points' shape.
    Args:
        topology: the grid (`SmokeTopology`): its walls and slip rule the samples past the edges.
        state: the smoke (`SmokeState`): its face velocities u, v [ny, nx] m/s.
        x: the points' x in cells (x = position / h), any shape.
        y: the points' y in cells (y = position / h), the shape of x."""
    return _sample_at(topology, state.u, _U, x, y), _sample_at(topology, state.v, _V, x, y)


def _advect_once(topology, state, field, offset, dt, with_range=False):
    x, y = _points(field.shape, offset)
    u, v = velocity_at(topology, state, x, y)
    bx, by = x - dt * u / topology.spacing, y - dt * v / topology.spacing
    if topology.walls == "closed":  # a traced point stays in the box
        bx = jnp.clip(bx, 0.0, topology.shape[1])
        by = jnp.clip(by, 0.0, topology.shape[0])
    return _sample_at(topology, field, offset, bx, by, with_range)


def advect(topology: SmokeTopology, state: SmokeState, field, offset, dt):
    """`field` carried along the velocity of `state` for dt s, by `topology.advection` ([ny, nx], its unit).
    Args:
        topology: the grid (`SmokeTopology`): advection, walls, spacing h m.
        state: the smoke (`SmokeState`) whose face velocities u, v [ny, nx] m/s carry the field.
        field: [ny, nx], the values carried (any unit: a velocity component or the density).
        offset: where `field` is sampled, (x, y) in cells: physics.smoke._U, _V or _D.
        dt: s, the time step."""
    if topology.advection == "semi-lagrangian":
        return _advect_once(topology, state, field, offset, dt)
    forward, low, high = _advect_once(topology, state, field, offset, dt, with_range=True)
    back = _advect_once(topology, state, forward, offset, -dt)
    return jnp.clip(forward + 0.5 * (field - back), low, high)


def _centre_velocity(topology, u, v):
    closed = topology.walls == "closed"
    ue, ve = extended_faces(u, 1, closed), extended_faces(v, 0, closed)
    return 0.5 * (ue[:, 1:] + ue[:, :-1]), 0.5 * (ve[1:, :] + ve[:-1, :])


def vorticity(topology: SmokeTopology, u, v):
    """omega = dv/dx - du/dy [ny, nx] 1/s at the cell centres (central differences of centred velocities).

    Args:
        topology: the grid (`SmokeTopology`): walls, spacing h m.
        u: [ny, nx] m/s, the x velocity on the cells' left faces.
        v: [ny, nx] m/s, the y velocity on the cells' bottom faces.
    """
    uc, vc = _centre_velocity(topology, u, v)
    h = topology.spacing
    if topology.walls == "closed":
        dvdx = jnp.gradient(vc, h, axis=1)
        dudy = jnp.gradient(uc, h, axis=0)
    else:
        dvdx = (jnp.roll(vc, -1, 1) - jnp.roll(vc, 1, 1)) / (2 * h)
        dudy = (jnp.roll(uc, -1, 0) - jnp.roll(uc, 1, 0)) / (2 * h)
    return dvdx - dudy


def _to_faces(topology, fx, fy):
    """Cell-centred (fx, fy) averaged onto the left and bottom faces."""
    return with_walls(topology, 0.5 * (fx + jnp.roll(fx, 1, axis=1)), 0.5 * (fy + jnp.roll(fy, 1, axis=0)))


def confinement(topology: SmokeTopology, eps, u, v):
    """Vorticity confinement accelerations on the faces: eps h (N x omega), N = grad|omega| / |grad|omega||.

    Args:
        topology: the grid (`SmokeTopology`): walls, spacing h m.
        eps: the confinement strength (`SmokeParams.vorticity`): a scalar or [ny, nx].
        u: [ny, nx] m/s, the x velocity on the cells' left faces.
        v: [ny, nx] m/s, the y velocity on the cells' bottom faces.

    Returns:
        (u, v) [ny, nx] each, the face accelerations of the confinement force.
    """
    w = vorticity(topology, u, v)
    a = jnp.abs(w)
    h = topology.spacing
    if topology.walls == "closed":
        gx, gy = jnp.gradient(a, h, axis=1), jnp.gradient(a, h, axis=0)
    else:
        gx = (jnp.roll(a, -1, 1) - jnp.roll(a, 1, 1)) / (2 * h)
        gy = (jnp.roll(a, -1, 0) - jnp.roll(a, 1, 0)) / (2 * h)
    n = safe_normalize(jnp.stack([gx, gy], -1), eps=1e-12)
    nx, ny = n[..., 0], n[..., 1]
    return _to_faces(topology, eps * h * ny * w, -eps * h * nx * w)


def smoke_step(topology: SmokeTopology, params: SmokeParams, state: SmokeState, dt) -> SmokeState:
    """One step of dt s (module docstring): advect, dissipate and feed the density; advect the velocity,
    add buoyancy and vorticity confinement; project.
    Args:
        topology: the grid (`SmokeTopology`).
        params: the smoke's `SmokeParams`.
        state: the smoke (`SmokeState`) at the start of the step.
        dt: s, the step."""
    d = advect(topology, state, state.density, _D, dt)
    d = d * jnp.exp(-params.dissipation * dt) + dt * params.inflow_rate * params.inflow_mask
    u = advect(topology, state, state.u, _U, dt)
    v = advect(topology, state, state.v, _V, dt)
    closed = topology.walls == "closed"
    below = jnp.concatenate([d[:1], d[:-1]], axis=0) if closed else jnp.roll(d, 1, axis=0)
    v = v + dt * params.buoyancy * 0.5 * (d + below)
    fu, fv = confinement(topology, params.vorticity, u, v)
    u, v = u + dt * fu, v + dt * fv
    u, v = project(topology, *with_walls(topology, u, v))
    return SmokeState(u=u, v=v, density=d)


def smoke_rollout(topology: SmokeTopology, params: SmokeParams, state: SmokeState, *, frames: int,
                  substeps: int = 1, frame_dt=1.0 / 30.0) -> SmokeState:
    """The smoke at every frame (leaves [frames + 1, ny, nx], the first `state`), `substeps` steps a frame;
    each frame checkpointed (its steps recomputed in the backward pass).
    Args:
        topology: the grid (`SmokeTopology`).
        params: the smoke's `SmokeParams`.
        state: the smoke (`SmokeState`, leaves [ny, nx]) at frame 0.
        frames: the number of frames after the first (static).
        substeps: the solver steps a frame (static), each of frame_dt / substeps s.
        frame_dt: s, the time between frames."""
    dt = frame_dt / substeps

    @jax.checkpoint
    def frame(s, _):
        s = jax.lax.fori_loop(0, substeps, lambda k, x: smoke_step(topology, params, x, dt), s)
        return s, s

    _, traj = jax.lax.scan(frame, state, None, length=frames)
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), state, traj)
