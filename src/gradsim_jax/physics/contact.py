"""Penalty contact of particles with a ground plane, with isotropic Coulomb friction.

Plane: unit normal n (`Params.ground_normal`, normalized here), height h, particle radius r (PHYSICS.md,
"Ground contact"). Penetration c = min(n . x - h - r, 0) <= 0; normal velocity vn = n . v; tangential
velocity vt = v - n vn. Normal force magnitude fn = c ke + min(vn, 0) kd (<= 0 in contact). Friction along
vt: magnitude min(kf |vt|, mu |fn|), opposing vt; written as -vt min(kf, mu |fn| / |vt|) so that the force
is linear (viscous) at vt = 0 and its gradient is finite there (the dflex/Warp per-axis clamp is replaced
by this isotropic cone). Force on the particle: -n fn - friction; zero out of contact, continuous at c = 0.
"""

from __future__ import annotations

import jax.numpy as jnp

from gradsim_jax.mathutil import safe_div, safe_norm, safe_normalize


def ground_contact(params, x, v):
    """Ground contact forces per particle: [n, 3] N."""
    n = safe_normalize(params.ground_normal)
    c = jnp.minimum(x @ n - params.ground_height - params.particle_radius, 0.0)  # [n]
    vn = v @ n
    vt = v - vn[:, None] * n
    in_contact = c < 0.0
    fn = c * params.contact_ke + jnp.minimum(vn, 0.0) * params.contact_kd
    fn = jnp.where(in_contact, fn, 0.0)
    limit = params.contact_mu * jnp.abs(fn)
    vt_len = safe_norm(vt)
    sticking = params.contact_kf * vt_len <= limit
    coefficient = jnp.where(sticking, params.contact_kf, safe_div(limit, vt_len))
    friction = vt * jnp.where(in_contact, coefficient, 0.0)[:, None]
    return -fn[:, None] * n - friction
