"""Embedded FEM soft-body scenes of the system-identification demos (`gradsim-jax demo fem-material`,
`demo fem-mass`): gradSim's FEM experiments (Jatavallabhula et al., ICLR 2021, Table 3: material
parameters mu, lambda and per-particle masses of a soft body from video).

Each builder returns a `gradsim_jax.sysid.Experiment` whose `theta` holds the true quantities:
- `fem_material`: a soft box of tets (known density) dropped level onto the ground: it lands on its whole
  base at once, squashes (to ~60 % of its height), bulges, bounces and wobbles until its damping stops it.
  The squash and the bulge show k_lambda and k_mu (the bulge is the Poisson effect, set by their ratio),
  the wobble's decay k_damp. Measured landscape (64 px, 30 frames): every gradient of the loss in k_mu and
  in k_lambda points to the truth over 0.99..1.01 x the truth, down to 0.1 % of it.
  Joint fit of all three from 50 % off (64 px): relative errors ~1e-6. Thrown sideways instead (1 m/s),
  friction shears its base and it rocks on its edges: the gradients then point the wrong way within 0.3 %
  of the truth and a joint fit stalls at ~1e-3 (vs ~1e-6 dropped level).
- `fem_mass`: the soft box pushed by known forces: a different push on every particle during the first
  frames (known, in theta["push"]), in free fall; each particle's response to its push, F / m, is what
  shows its mass (gradSim's demo_fem estimates per-particle masses). The material is known. The demo fits
  a density field first (`FitConfig.density_first`), then every mass; a per-particle fit from 50 % off alone
  ends in one of many local minima (light particles, of one tet, hardly move apart from their neighbours).
  `density_gradient` and `mass_jitter` make masses that are not one density's. Measured figures: README,
  "FEM soft bodies".

Units SI, y up, the ground the plane y = 0. Render setup (`scenes.demos.finish_experiment`): per-face
checker colours (deformation inside the silhouette shows), an oblique light, a camera framed on the true
motion. Substeps: semi-implicit Euler on the tets is stable for dt < ~0.3 h / sqrt((k_lambda + 2 k_mu) /
density) for elements of size h (`geometry.soft_body`), with room for stiffnesses guessed 50 % high.
"""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry import quat_from_axis_angle, soft_body
from gradsim_jax.geometry.rotations import quat_rotate
from gradsim_jax.geometry.tet_shapes import box_tets, sphere_tets
from gradsim_jax.scenes.demos import finish_experiment
from gradsim_jax.sysid import Experiment, default_theta
from gradsim_jax.typing import replace_paths

#: Quantities `fem_material` can estimate (its theta holds their true values).
MATERIAL_QUANTITIES = ("fem_mu", "fem_lambda", "fem_damping")


def wave_step(*, k_mu: float, k_lambda: float, density: float, h: float) -> float:
    """The explicit step limit 0.3 h / c, c = sqrt((k_lambda + 2 k_mu) / density) (s), for elements of size h.

    Args:
        k_mu: Pa, the material's k_mu.
        k_lambda: Pa, the material's k_lambda.
        density: kg/m^3, the material's density.
        h: m, the element size.

    Returns:
        s, the largest stable step (float).
    """
    return 0.3 * h / float(np.sqrt((k_lambda + 2.0 * k_mu) / density))


def _body_mesh(shape: str, cells, extent):
    """(vertices centred on x = z = 0 with their lowest point at y = 0, tets) of a box or a ball."""
    if shape == "box":
        x, t = box_tets(cells, extent, pattern=5)
    elif shape == "sphere":
        x, t = sphere_tets(float(np.max(extent)) / 2.0, int(np.max(cells)))
    else:
        raise ValueError(f"unknown soft body shape {shape!r}: box or sphere")
    x = np.asarray(x, np.float64)
    lo, hi = x.min(0), x.max(0)
    return x - [(lo[0] + hi[0]) / 2, lo[1], (lo[2] + hi[2]) / 2], t


def fem_material(*, size: int = 64, frames: int = 30, substeps: int = 16, frame_dt: float = 1.0 / 30.0,
                 shape: str = "box", cells=(3, 2, 2), extent=(0.3, 0.2, 0.2), density: float = 1000.0,
                 k_mu: float = 4.0e3, k_lambda: float = 6.0e3, k_damp: float = 20.0, height: float = 0.1,
                 velocity=(0.0, 0.0, 0.0), tilt: float = 0.0, contact_ke: float = 1.0e4, contact_kd: float = 10.0,
                 contact_kf: float = 20.0, contact_mu: float = 0.6, estimate=MATERIAL_QUANTITIES,
                 elevation: float = 20.0, azimuth: float = 25.0) -> Experiment:
    """A soft `shape` ("box" of `cells` cells, 5 tets each, spanning `extent` m; "sphere" of diameter
    max(extent)) of `density` kg/m^3 and material (k_mu, k_lambda Pa, k_damp Pa s), released `height` m above
    the ground (its lowest point), tilted `tilt` degrees about z (default: level), with `velocity` m/s (default:
    at rest): it lands, squashes and wobbles (ground contact of the particles: contact_ke, kd, kf, mu).
    `estimate`: the quantities theta holds (MATERIAL_QUANTITIES).

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        shape: "box" or "sphere".
        cells: [3] cells of the box along x, y, z (the sphere uses their maximum as its resolution).
        extent: [3] m, the box's size along x, y, z (the sphere's diameter: their maximum).
        density: kg/m^3, the body's density.
        k_mu: Pa, the shear stiffness.
        k_lambda: Pa, the volume stiffness.
        k_damp: Pa s, the material damping.
        height: m, the release height of the body's lowest point above the ground.
        velocity: [3] m/s, the initial velocity.
        tilt: degrees, the rotation about z.
        contact_ke: N/m, the ground contact's stiffness.
        contact_kd: N s/m, the ground contact's damping.
        contact_kf: N s/m, the friction's viscous slope.
        contact_mu: the Coulomb friction coefficient (dimensionless).
        estimate: the quantities (of MATERIAL_QUANTITIES) theta holds besides push.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment`.

    Raises:
        ValueError: for an unknown `shape`.
    """
    x, t = _body_mesh(shape, cells, extent)
    if tilt:
        x = quat_rotate(quat_from_axis_angle((0.0, 0.0, 1.0), np.deg2rad(tilt)), x)
        x = x - [0.0, x[:, 1].min(), 0.0]
    body = soft_body(x, t, density=density, k_mu=k_mu, k_lambda=k_lambda, k_damp=k_damp,
                     pos=(0.0, height, 0.0), vel=velocity, name="fem_material body")
    topology, params, state0 = body.build(ground=True, contact_ke=contact_ke, contact_kd=contact_kd,
                                          contact_kf=contact_kf, contact_mu=contact_mu, particle_radius=0.0)
    theta = default_theta(topology, params, state0, list(estimate))
    return finish_experiment("fem_material", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, elevation=elevation, azimuth=azimuth)


def mass_push(x, *, scale: float = 1.0, seed: int = 0) -> np.ndarray:
    """Known pushes [n, 3] N, a different one on every particle: a smooth field (a spin about y plus an
    outward swell) plus a seeded random part, `scale` N per particle on average.

    Args:
        x: [n, 3] m, particle positions.
        scale: N, the mean force magnitude per particle.
        seed: the random part's seed.

    Returns:
        [n, 3] float32 N, the push on each particle.
    """
    x = np.asarray(x, np.float64)
    r = x - x.mean(0)
    r /= max(float(np.max(np.linalg.norm(r, axis=1))), 1e-9)
    rng = np.random.default_rng(seed)
    f = np.stack([-r[:, 2], 0.3 * r[:, 1], r[:, 0]], 1) + 0.5 * r + 0.5 * rng.normal(size=x.shape)
    f *= scale / max(float(np.mean(np.linalg.norm(f, axis=1))), 1e-12)
    return f.astype(np.float32)


def fem_mass(*, size: int = 64, frames: int = 20, substeps: int = 16, frame_dt: float = 1.0 / 30.0,
             cells=(3, 2, 2), extent=(0.3, 0.2, 0.2), density: float = 1000.0, k_mu: float = 2.0e3,
             k_lambda: float = 3.0e3, k_damp: float = 5.0, push: float = 3.0, push_frames: int = 4,
             velocity=(0.0, 1.5, 0.0), gravity: Optional[float] = None, seed: int = 0,
             density_gradient: float = 0.0, mass_jitter: float = 0.0,
             elevation: float = 20.0, azimuth: float = 25.0) -> Experiment:
    """A soft box (as `fem_material`'s) thrown up with `velocity` m/s, each particle pushed by its own known
    force (`mass_push`, `push` N on average) during the first `push_frames` frames; no ground. theta holds
    "particle_mass" (every particle's mass, lumped from `density`) and the known push. `gravity`: m/s^2
    (default 9.81). Masses that are not one density's: `density_gradient` g makes the density rise linearly
    along x from (1 - g) to (1 + g) x `density` across the box, and `mass_jitter` j multiplies every
    particle's mass by its own factor drawn uniformly from [1 - j, 1 + j] (seeded by `seed`).

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        cells: [3] cells of the box along x, y, z.
        extent: [3] m, the box's size along x, y, z.
        density: kg/m^3, the body's density.
        k_mu: Pa, the shear stiffness.
        k_lambda: Pa, the volume stiffness.
        k_damp: Pa s, the material damping.
        push: N, the pushes' mean magnitude per particle (`mass_push`).
        push_frames: number of leading frames during which the pushes act.
        velocity: [3] m/s, the initial velocity.
        gravity: m/s^2, the magnitude of gravity (along -y); None: 9.81.
        seed: seed of the pushes' random part (and, plus one, of the mass jitter).
        density_gradient: g in [0, 1), the density's linear rise along x (0: uniform).
        mass_jitter: j in [0, 1), the spread of the per-particle mass factors (0: none).
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment`; its theta holds particle_mass [n] kg and push [n, 3] N.

    Raises:
        ValueError: when density_gradient or mass_jitter is outside [0, 1).
    """
    if not (0.0 <= density_gradient < 1.0 and 0.0 <= mass_jitter < 1.0):
        raise ValueError(f"density_gradient and mass_jitter must be in [0, 1), got {density_gradient} and "
                         f"{mass_jitter}")
    x, t = _body_mesh("box", cells, extent)
    body = soft_body(x, t, density=density, k_mu=k_mu, k_lambda=k_lambda, k_damp=k_damp,
                     pos=(0.0, 0.0, 0.0), vel=velocity, name="fem_mass body")
    g = 9.81 if gravity is None else gravity
    topology, params, state0 = body.build(gravity=(0.0, -g, 0.0))
    if density_gradient or mass_jitter:
        rest = np.asarray(x, np.float64)
        across = rest[:, 0] - 0.5 * (rest[:, 0].min() + rest[:, 0].max())
        factor = 1.0 + density_gradient * across / max(float(np.abs(across).max()), 1e-12)
        factor = factor * np.random.default_rng(seed + 1).uniform(1.0 - mass_jitter, 1.0 + mass_jitter, len(rest))
        dtype = jnp.asarray(params.particles.mass).dtype
        mass = np.asarray(params.particles.mass, np.float64) * factor
        params = replace_paths(params, {"particles.mass": jnp.asarray(mass, dtype)})
    theta = default_theta(topology, params, state0, ["particle_mass"])
    theta["push"] = jnp.asarray(mass_push(body.x, scale=push, seed=seed))
    return finish_experiment("fem_mass", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, push_frames=push_frames, elevation=elevation,
                             azimuth=azimuth)
