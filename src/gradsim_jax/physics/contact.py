"""Penalty contact of particles with a ground plane, with isotropic Coulomb friction.

Plane: unit normal n (`Params.ground_normal`, normalized here), height h, particle radius r (PHYSICS.md,
"Ground contact"). Penetration c = min(n . x - h - r, 0) <= 0; normal velocity vn = n . v; tangential
velocity vt = v - n vn. Normal force magnitude fn = c ke + min(vn, 0) kd (<= 0 in contact). Friction along
vt: magnitude min(kf |vt|, mu |fn|), opposing vt; written as -vt min(kf, mu |fn| / |vt|) so that the force
is linear (viscous) at vt = 0 and its gradient is finite there (the dflex/Warp per-axis clamp is replaced
by this isotropic cone). Force on the particle: -n fn - friction; zero out of contact, continuous at c = 0.

Integration of the contact's damping (`SemiImplicitEuler(implicit_contact=...)`). The normal damping kd and
the viscous friction kf act on a particle like dampers of rates b = dt kd / m and dt kf / m per step; taken
at the step's start velocity (Warp's explicit penalty, `ground_contact(..., v_free=None)`) they overshoot
for b > 1 and blow up for b > 2, and together with the cloth's own stiffness sooner (the step's criterion
dt^2 k / m + 2 b < 4 of `physics.stability`). Warp's defaults reach those rates on light particles (kf 100
on 10 g at 32 substeps of 30 fps: b = 10.4): a cloth sliding to rest then chatters in the stick regime, its
motion is continuous but its derivative by any parameter grows ~9x per step (a skidding cloth's gradient
of friction was 1.3x off its finite differences in float64, float32 98 % off float64). `implicit_penalty_force`
(the default) takes them backward: on the velocity `v_free` the step would give without the contact
(every other force, gravity and the elastic normal penalty applied), the damper of rate b divides the
velocity it acts on by (1 + b), i.e. kd and kf act as kd / (1 + b) and kf / (1 + b) on v_free; friction
stops a sticking particle without reversing it, the Coulomb limit uses the damped normal force, and both
laws are the explicit ones where b << 1. The stick-slip switch stays continuous (both sides give
|v1_t| = |v_free,t| / (1 + b) at the switch). The skidding cloth's gradient then agrees with central
differences in float64 to within their own error, and float32 with float64 (tests/physics/
test_physics_friction.py; benchmarks/bench_friction.py). Warp's body contact smooths |vt| with a Huber norm
(`wp.norm_huber(vt, delta)`, friction vt / H(vt) min(kf H, mu |fn|)); below delta its friction exceeds the
Coulomb limit (2 mu |fn| / |vt| for |vt| < 2 delta when sliding), and on the skidding cloth its gradient
was 1e200 (delta 1 and 0.1): not used.

A particle at rest on the plane sits at n . x = h + r (less its sag m g / ke). One placed deeper, e.g. a
cloth laid at y = ground_height, starts with a compressed penalty spring that releases ke c^2 / 2 with no
damping (kd acts only while vn < 0): it leaves at c sqrt(ke / m). `contact_report` finds such states on
the host before a run, and checks the step against the penalty spring's stability limit: semi-implicit
Euler on m c'' = -ke c - kd c' is stable for dt^2 ke / m + 2 dt kd / m < 4 with explicit damping, and for
dt^2 ke / m < 4 with the backward damping (it only shrinks the approach velocity; a particle leaving the
plane is undamped).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_div, safe_norm, safe_normalize
from gradsim_jax.typing import Array, pytree_dataclass


@pytree_dataclass
class ContactParams:
    """Penalty ground contact of particles: ke (N/m), kd (N s/m), kf (N s/m, friction's viscous slope),
    mu (Coulomb coefficient); scalars shared by every particle."""

    ke: Array
    kd: Array
    kf: Array
    mu: Array


def penalty_force(normal, c, v, ke, kd, kf, mu, smoothing: float = 0.0):
    """Penalty contact force [..., 3] on points at signed distance c [...] (m; < 0 inside) from a surface of
    unit normal `normal` [3] (a plane) or [..., 3] (each point's), moving at v [..., 3]; zero out of contact (the
    model in the module docstring; Warp's ground law, whose friction cap mu |fn| includes the approach damping;
    Warp's particle-shape kernel caps at mu |c ke|, `physics.colliders`). ke, kd, kf, mu broadcast against c.
    `smoothing` (m, static): the smooth onset of `contact_depth` (0: the exact penalty).

    Args:
        normal: [3] or [..., 3], the surface's unit outward normal (a plane's, or each point's).
        c: [...] m, signed distance of each point to the surface (< 0 inside).
        v: [..., 3] m/s, the points' velocities relative to the surface.
        ke: N/m, contact stiffness, broadcasting against `c`.
        kd: N s/m, approach damping, broadcasting against `c`.
        kf: N s/m, friction's viscous slope, broadcasting against `c`.
        mu: dimensionless Coulomb coefficient, broadcasting against `c`.
        smoothing: m, static, the smooth onset of `contact_depth` (0: the exact penalty).

    Returns:
        [..., 3] N, the contact force on each point.
    """
    c, weight = contact_depth(c, smoothing)
    vn = jnp.sum(v * normal, axis=-1)
    vt = v - vn[..., None] * normal
    fn = c * ke + weight * jnp.minimum(vn, 0.0) * kd
    return -fn[..., None] * normal - _friction(vt, kf, mu * jnp.abs(fn), weight)


def contact_depth(c, smoothing: float = 0.0):
    """(penetration [...] <= 0, contact weight [...] in [0, 1]) of points at signed distance c [...] (m).

    smoothing 0 (static): min(c, 0) and 1 inside, 0 outside: the force starts with a kink at c = 0.
    smoothing s > 0: -s softplus(-c / s) and sigmoid(-c / s): the spring, its damping and friction start
    smoothly over a few s around the surface, so a point passing just outside still feels (and its gradient
    sees) the surface, at the price of a force of up to ke s ln 2 at c = 0, decaying as ke s e^(-c / s)
    outside; a point rests up to s ln 2 higher under a light load (docs: concepts/physics, "Smooth onset").

    Args:
        c: [...] m, signed distance of each point to the surface (< 0 inside).
        smoothing: m, static, the onset width s (0: the exact min(c, 0)).

    Returns:
        (penetration [...] m, <= 0; weight [...] dimensionless in [0, 1]).
    """
    if not smoothing:
        return jnp.minimum(c, 0.0), (c < 0.0).astype(c.dtype)
    z = -c / smoothing
    return -smoothing * jax.nn.softplus(z), jax.nn.sigmoid(z)


def _friction(vt, slope, limit, weight):
    """Isotropic Coulomb friction [..., 3] of tangential velocities vt [..., 3]: slope |vt| (viscous) up to
    `limit` (mu |fn|) along vt, times the contact weight (0 out of contact); finite gradients at vt = 0."""
    vt_len = safe_norm(vt)
    sticking = slope * vt_len <= limit
    coefficient = jnp.where(sticking, slope, safe_div(limit, vt_len))
    return vt * (coefficient * weight)[..., None]


def implicit_penalty_force(normal, c, v_free, inv_mass, dt, ke, kd, kf, mu, smoothing: float = 0.0):
    """The penalty contact force [..., 3] of `penalty_force` with its damping (kd) and viscous friction (kf)
    integrated backward over the step dt (s) for points of inverse mass `inv_mass` [...] (1/kg; 0: kinematic)
    whose velocity at the end of the step without this force would be `v_free` [..., 3] (module docstring):
    the elastic normal force c ke is the explicit one; the approach damping acts on the normal velocity after
    it, at the rate kd / (1 + dt kd / m); friction on the tangential part of v_free, at the viscous slope
    kf / (1 + dt kf / m) up to mu |fn|, fn the damped normal force. Adding the force to the step's other
    forces never reverses a tangential velocity nor an approach. `smoothing`: as in `penalty_force`.

    Args:
        normal: [3] or [..., 3], the surface's unit outward normal (a plane's, or each point's).
        c: [...] m, signed distance of each point to the surface (< 0 inside).
        v_free: [..., 3] m/s, the points' velocities at the end of the step without this force, relative to the
            surface.
        inv_mass: [...] 1/kg, inverse masses of the points (0: kinematic).
        dt: () s, the step.
        ke: N/m, contact stiffness, broadcasting against `c`.
        kd: N s/m, approach damping, broadcasting against `c`.
        kf: N s/m, friction's viscous slope, broadcasting against `c`.
        mu: dimensionless Coulomb coefficient, broadcasting against `c`.
        smoothing: m, static, as in `penalty_force`.

    Returns:
        [..., 3] N, the contact force on each point.
    """
    c, weight = contact_depth(c, smoothing)
    elastic = c * ke
    vn_free = jnp.sum(v_free * normal, axis=-1)
    vn = vn_free - dt * inv_mass * elastic  # the normal velocity after the elastic push (c ke <= 0)
    vt = v_free - vn_free[..., None] * normal
    damping = kd / (1.0 + dt * kd * inv_mass)
    fn = elastic + weight * jnp.minimum(vn, 0.0) * damping
    slope = kf / (1.0 + dt * kf * inv_mass)
    return -fn[..., None] * normal - _friction(vt, slope, mu * jnp.abs(fn), weight)


def ground_contact(topology, params, x, v, *, v_free=None, inv_mass=None, dt=None):
    """Ground contact forces per particle at positions x [n, 3] m: [n, 3] N. Without `v_free`, Warp's
    explicit penalty at the velocities v [n, 3] m/s (`penalty_force`); with `v_free` [n, 3] (the velocities
    the step of length `dt` s would reach without contact) and `inv_mass` [n] 1/kg, its damping and friction
    integrated backward (`implicit_penalty_force`, what `SemiImplicitEuler` uses by default).

    Args:
        topology: the scene's Topology (unused; the signature of every contact term).
        params: the scene's Params; uses `params.world` (ground_normal, ground_height m, contact_smoothing m),
            `params.contact` and `params.particles.radius` (m).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities (used when `v_free` is None).
        v_free: [n, 3] m/s, the velocities the step would reach without contact, or None for explicit forces.
        inv_mass: [n] 1/kg, inverse particle masses (with `v_free`; 0 for kinematic particles).
        dt: () s, the step (with `v_free`).

    Returns:
        [n, 3] N, the ground contact force on each particle.
    """
    world, contact = params.world, params.contact
    n = safe_normalize(world.ground_normal)
    c = x @ n - world.ground_height - params.particles.radius  # [n]
    s = world.contact_smoothing
    if v_free is None:
        return penalty_force(n, c, v, contact.ke, contact.kd, contact.kf, contact.mu, s)
    return implicit_penalty_force(n, c, v_free, inv_mass, dt, contact.ke, contact.kd, contact.kf, contact.mu, s)


def max_stable_dt(ke, kd, mass, implicit: bool = True):
    """The largest stable step (s) of a penalty contact spring ke (N/m) with damping kd (N s/m) on a particle of
    `mass` (kg): semi-implicit Euler on m c'' = -ke c - kd c' needs dt^2 ke / m + 2 dt kd / m < 4 with explicit
    damping, dt^2 ke / m < 4 with it taken backward (`implicit`); inf where ke and kd are 0. numpy, broadcasting.

    Args:
        ke: N/m, contact stiffness (scalar or array).
        kd: N s/m, contact damping (scalar or array).
        mass: kg, the particle's mass (scalar or array).
        implicit: True when the damping is integrated backward (then kd does not bound the step).

    Returns:
        s, numpy float64 array of the broadcast shape (inf where ke and kd are 0).
    """
    ke, kd, mass = (np.asarray(a, np.float64) for a in (ke, kd, mass))
    gamma = np.zeros_like(kd) if implicit else kd / mass
    rate = gamma + np.sqrt(gamma * gamma + 4.0 * ke / mass)
    return np.where(rate > 0, 4.0 / np.where(rate > 0, rate, 1.0), np.inf)


class ContactWarning(UserWarning):
    """The initial state starts deep in ground contact, or the contact is too stiff for the time step."""


#: Penetration beyond the sag under the particle's own weight, as a fraction of the particle radius, from
#: which an initial state counts as deep contact (at the defaults, a release speed of about 0.3 m/s).
DEEP_FRACTION = 0.1


@dataclasses.dataclass(frozen=True)
class ContactReport:
    """Ground contact of an initial state, on the host (`contact_report`). Lengths in m along the normal.

    particles_in_contact: free particles closer to the plane than ground_height + particle_radius.
    depth: the deepest of them (m; 0 when none); particle: its index (None when none).
    release_speed: the largest c sqrt(ke / m) (m/s): how fast the penalty spring would throw a particle out.
    deep: some free particle is deeper than its sag m g / ke plus DEEP_FRACTION x particle_radius.
    max_stable_dt: the largest stable step for the contact spring of the lightest free particle (s).
    dt: the step checked (None: not checked); stable: dt < max_stable_dt (True when not checked).
    """

    ground_height: float
    particle_radius: float
    particles_in_contact: int = 0
    depth: float = 0.0
    particle: Optional[int] = None
    release_speed: float = 0.0
    deep: bool = False
    max_stable_dt: float = math.inf
    dt: Optional[float] = None
    contact_ke: float = 0.0
    contact_kd: float = 0.0
    lightest_mass: float = math.inf
    implicit: bool = True

    @property
    def stable(self) -> bool:
        return self.dt is None or self.dt < self.max_stable_dt

    @property
    def message(self) -> str:
        """What is wrong and what to do, or "" when nothing is."""
        parts = []
        h, r = self.ground_height, self.particle_radius
        if self.deep:
            parts.append(
                f"the initial state starts in deep ground contact: {self.particles_in_contact} free particle(s) "
                f"lie below ground_height + particle_radius = {h + r:.4g} m (ground_height {h:.4g} m, "
                f"particle_radius {r:.4g} m), particle {self.particle} by {self.depth:.3g} m; the contact "
                f"force will throw them out at up to {self.release_speed:.2g} m/s. Place the cloth at "
                f"ground_height + particle_radius or above, or make particle_radius smaller")
        if not self.stable:
            factor = math.ceil(self.dt / (0.8 * self.max_stable_dt))
            if self.implicit:
                what, rule, fix = f"contact_ke {self.contact_ke:.4g}", "dt^2 ke / m < 4", "contact_ke"
            else:
                what = f"contact_ke {self.contact_ke:.4g} and contact_kd {self.contact_kd:.4g}"
                rule, fix = "dt^2 ke / m + 2 dt kd / m < 4", "contact_ke / contact_kd"
            parts.append(
                f"the ground contact is too stiff for the time step: {what} on a {self.lightest_mass:.3g} kg "
                f"particle need a step below {self.max_stable_dt:.3g} s ({rule}), the step is {self.dt:.3g} s: use "
                f"{factor} times as many substeps, or a smaller {fix}")
        return "; ".join(parts)


def contact_report(topology, params, state, dt: Optional[float] = None, *, implicit: bool = True) -> ContactReport:
    """Host-side check of the initial `state`'s ground contact (and, given `dt` in s, of the step; `implicit`:
    the integrator takes the contact's damping backward, `SemiImplicitEuler(implicit_contact=True)`, the
    default, so that only ke bounds the step).

    Only free particles count (pinned and massless ones do not move). A scene without ground gives an
    empty report. Inputs must be concrete (not traced).

    Args:
        topology: the scene's Topology (ground, particles.pinned).
        params: the scene's Params (world's ground and gravity, particles' mass kg and radius m, contact).
        state: the scene's concrete initial State (particles.x [n, 3] m).
        dt: s, the step to check; None skips the stability check.
        implicit: whether the integrator takes the contact's damping backward.

    Returns:
        The ContactReport.
    """
    h = float(np.asarray(params.world.ground_height))
    r = float(np.asarray(params.particles.radius))
    if not topology.ground:
        return ContactReport(ground_height=h, particle_radius=r)
    mass = np.asarray(params.particles.mass, np.float64)
    free = ~np.asarray(topology.particles.pinned) & (mass > 0.0)
    if not free.any():
        return ContactReport(ground_height=h, particle_radius=r)
    ke = float(np.asarray(params.contact.ke))
    kd = float(np.asarray(params.contact.kd))
    normal = np.asarray(params.world.ground_normal, np.float64)
    normal = normal / np.linalg.norm(normal)
    m = mass[free]
    c = np.maximum(h + r - np.asarray(state.particles.x, np.float64)[free] @ normal, 0.0)  # penetration [free]
    weight = np.maximum(-float(np.asarray(params.world.gravity, np.float64) @ normal), 0.0) * m
    sag = weight / ke if ke > 0 else np.full_like(m, np.inf)
    deep = c - sag > DEEP_FRACTION * r
    k = int(np.argmax(c))
    index = np.flatnonzero(free)
    return ContactReport(
        ground_height=h, particle_radius=r, particles_in_contact=int(np.count_nonzero(c > 0.0)),
        depth=float(c[k]), particle=int(index[k]) if c[k] > 0 else None,
        release_speed=float(np.max(c * np.sqrt(ke / m))), deep=bool(deep.any()),
        max_stable_dt=float(max_stable_dt(ke, kd, m.min(), implicit)), dt=None if dt is None else float(dt),
        contact_ke=ke, contact_kd=kd, lightest_mass=float(m.min()), implicit=bool(implicit))
