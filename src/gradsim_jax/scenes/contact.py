"""Embedded contact scenes of the system-identification demos between bodies and obstacles (`gradsim-jax demo
stack`, `demo drape`, `demo lift`).

- `stack`: two boxes of one mass and material: the lower one stands on the ground, the upper one is dropped
  level onto it from a few centimetres (overdamped contact: it lands without bouncing), then a known
  horizontal force pushes it along the lower box's top for some frames: it slides, spinning a little (the
  push acts off-centre), and stops against the friction between the boxes. The push acts as F / m (the
  mass), the deceleration after it as mu g (the friction between the boxes; the lower box, pressed by both
  masses, never slides on the ground). Contact: penalty between the bodies (`physics.bodycontact`), each
  pair's coefficients the mean of the two bodies' (one material: the boxes' own), so `body_mu` is the
  friction between the boxes and `body_mass` both boxes' mass.
- `drape`: a square cloth released level above a sphere (a static collider) lying on the floor, off-centre:
  it folds over the sphere and slides down it (bending stiffness, friction on the sphere).
- `lift`: a cloth at rest on the floor; a rod (a kinematic capsule collider, keyframes) rises under one corner
  and holds it up, while a known pull on the opposite edge separates the mass from the stiffness.

Rendering: the depth softmax's temperature is STACK_GAMMA, not the renderer's 1e-4. At 1e-4 a face nearer by
more than about 9 gamma (in the normalized depth) wins a pixel as soon as its edge comes within the distance
cutoff, a step: along the boxes' ridge edges pixels flip colour for vertex moves of micrometres, and the loss
in the mass was V-shaped (5.5e-6 at 1e-4 relative off, 2.7e-5 at 1e-3: the fit stalled 0.5 % off). At 1e-2 it
is quadratic (1.4e-8 and 1.6e-6), at the price of 0.5 % of a hidden face's colour showing through.

Units SI, y up, the ground y = 0. Substeps and coefficients are chosen for the penalty step's stability on the
ten contact points of a box's face (`physics.bodycontact.contact_step_numbers`: dt^2 N ke / m + 2 dt N kd / m
< 4 and dt N kf / m < 2, m the pair's reduced mass) with room for masses guessed 50 % low: 2.9 and 1.25 there
(at kd 60, kf 50 the step blew up there and the gradient was 2e7).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry import box_mesh, cloth_grid, collider, combine, quat_from_axis_angle, rigid_body
from gradsim_jax.scenes.demos import finish_experiment
from gradsim_jax.sysid import Experiment, default_theta

GRAVITY = 9.81

#: The depth softmax temperature of the contact scenes' renders (module docstring).
STACK_GAMMA = 1e-2

#: Quantities the stack scene can estimate.
STACK_QUANTITIES = ("body_mass", "body_mu", "body_kf")


def stack(*, size: int = 64, frames: int = 36, substeps: int = 32, frame_dt: float = 1.0 / 30.0,
          mass: float = 1.0, lower=(0.35, 0.1, 0.2), upper=(0.1, 0.08, 0.1), drop: float = 0.0,
          pushes=(((15.0, 0.0, 0.0), 3, 3), ((-6.0, 0.0, 0.0), 18, 6)), push_point=(0.0, 0.0, 0.05),
          contact_ke: float = 1.0e4, contact_kd: float = 30.0, contact_kf: float = 30.0, contact_mu: float = 0.4,
          estimate=("body_mass", "body_mu"), elevation: float = 30.0, azimuth: float = 20.0) -> Experiment:
    """Boxes of half extents `lower` and `upper` m, each `mass` kg: the lower standing on the ground at the
    origin, the upper released level `drop` m above the lower's top at its -x end; for each (force, start, count)
    of `pushes`, from frame start for count frames the force N (world frame) acts on the upper box at
    `push_point` (body frame). `estimate`: quantities of STACK_QUANTITIES in theta.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        mass: kg, each box's mass.
        lower: [3] m, the lower box's half extents.
        upper: [3] m, the upper box's half extents.
        drop: m, the upper box's release height above its resting height on the lower one.
        pushes: (force [3] N world frame, start frame, frame count) of each known push on the upper box.
        push_point: [3] m, where the pushes act, in the upper box's frame (from its centre of mass).
        contact_ke: N/m, the penalty contact's stiffness (both boxes).
        contact_kd: N s/m, the penalty contact's damping.
        contact_kf: N s/m, the friction's viscous slope.
        contact_mu: the Coulomb friction coefficient (dimensionless).
        estimate: the quantities (of STACK_QUANTITIES) theta holds besides push.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment` (rendered with the depth temperature STACK_GAMMA).
    """
    material = {"contact_ke": contact_ke, "contact_kd": contact_kd, "contact_kf": contact_kf,
                "contact_mu": contact_mu}
    vl, fl = box_mesh(*lower)
    vu, fu = box_mesh(*upper)
    x_upper = -lower[0] + 1.3 * upper[0]
    # At rest: the lower box on its four bottom corners under both weights, the upper on the ten contact points
    # of its bottom face (`physics.bodycontact`) under its own; `drop` m above that.
    sag_lower, sag_upper = 2.0 * mass * GRAVITY / (4 * contact_ke), mass * GRAVITY / (10 * contact_ke)
    base = rigid_body(vl, fl, mass=mass, pos=(0.0, lower[1] - sag_lower, 0.0), **material)
    top = rigid_body(vu, fu, mass=mass, pos=(x_upper, 2 * lower[1] - sag_lower + upper[1] - sag_upper + drop, 0.0),
                     **material)
    scene = combine(base, top)
    for force, start, count in pushes:
        scene = scene.add_push(1, force, point=push_point, start=start * frame_dt, end=(start + count) * frame_dt)
    topology, params, state0 = scene.build(ground=True, rigid_contact="penalty", body_contact=True)
    theta = default_theta(topology, params, state0, list(estimate))
    return finish_experiment("stack", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, elevation=elevation, azimuth=azimuth,
                             gamma=STACK_GAMMA)


#: Quantities the drape scene can estimate.
DRAPE_QUANTITIES = ("bending", "collider_mu", "mass", "stiffness", "damping")


def drape(*, size: int = 64, frames: int = 40, cells: int = 8, substeps: int = 32, frame_dt: float = 1.0 / 30.0,
          side: float = 0.8, mass: float = 0.01, tri_ke: float = 200.0, tri_kd: float = 0.5, bend_ke: float = 0.05,
          radius: float = 0.25, offset: float = 0.2, drop: float = 0.05, collider_mu: float = 0.3,
          estimate=("bending", "collider_mu"), elevation: float = 25.0, azimuth: float = 30.0) -> Experiment:
    """A square cloth `side` m of cells x cells, `mass` kg per particle, released level `drop` m above a sphere of
    `radius` m lying on the ground (a static collider, friction `collider_mu`), the cloth's centre `offset` m to
    the side: it lands, folds over the sphere, slides down it and settles draped over it and the floor. `estimate`:
    quantities of DRAPE_QUANTITIES in theta.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        cells: cells along each side of the cloth grid.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        side: m, the cloth's side length.
        mass: kg per particle.
        tri_ke: N/m, the membrane's stiffness k_mu (also its area stiffness k_lambda).
        tri_kd: the membrane's damping k_damp.
        bend_ke: N m/rad, the bending stiffness.
        radius: m, the sphere's radius.
        offset: m, the cloth centre's offset along x from the sphere's centre.
        drop: m, the cloth's release height above the sphere's top.
        collider_mu: the sphere's Coulomb friction coefficient (dimensionless).
        estimate: the quantities (of DRAPE_QUANTITIES) theta holds besides push.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment` (rendered with the depth temperature STACK_GAMMA).
    """
    cell = side / cells
    top = 2.0 * radius + drop
    cloth = cloth_grid(cells, cells, cell, cell, pos=(offset - side / 2, top, -side / 2),
                       rot=quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2), mass=mass, tri_ke=tri_ke, tri_ka=tri_ke,
                       tri_kd=tri_kd, bend_ke=bend_ke)
    ball = collider("sphere", (0.0, radius, 0.0), radius=radius, ke=1.0e3, kd=10.0, kf=10.0, mu=collider_mu)
    topology, params, state0 = combine(cloth, ball).build(ground=True, contact_ke=1.0e3, contact_kd=10.0,
                                                          contact_kf=10.0, contact_mu=0.5)
    theta = default_theta(topology, params, state0, list(estimate))
    return finish_experiment("drape", topology, params, state0, theta, size=size, frames=frames, substeps=substeps,
                             frame_dt=frame_dt, elevation=elevation, azimuth=azimuth, gamma=STACK_GAMMA)


#: Quantities the lift scene can estimate.
LIFT_QUANTITIES = ("mass", "stiffness", "damping", "bending", "collider_mu")


def lift(*, size: int = 64, frames: int = 36, cells: int = 8, substeps: int = 32, frame_dt: float = 1.0 / 30.0,
         side: float = 0.6, mass: float = 0.01, tri_ke: float = 100.0, tri_kd: float = 0.2, bend_ke: float = 0.02,
         radius: float = 0.06, height: float = 0.25, rise_frames: int = 24, pull: float = 0.2, pull_frames: int = 8,
         estimate=("mass", "stiffness"), elevation: float = 25.0, azimuth: float = 40.0) -> Experiment:
    """A square cloth `side` m of cells x cells (`mass` kg per particle) at rest on the floor; a rod (a kinematic
    capsule collider of `radius` m, horizontal, across the diagonal, friction 0.8) rises from under the floor below
    one corner to `height` m over `rise_frames` frames and holds there, lifting the corner (lifted 35 cm with
    friction 0.5 the cloth slid off the rod, and the loss in the stiffness turned rough: one fit stopped 2.3e-3
    off; held, it is quadratic and fits reach 5e-6); the opposite edge is pulled
    outwards by a known `pull` N per particle during the first `pull_frames` frames. `estimate`: quantities of
    LIFT_QUANTITIES in theta.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        cells: cells along each side of the cloth grid.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        side: m, the cloth's side length.
        mass: kg per particle.
        tri_ke: N/m, the membrane's stiffness k_mu (also its area stiffness k_lambda).
        tri_kd: the membrane's damping k_damp.
        bend_ke: N m/rad, the bending stiffness.
        radius: m, the rod's (capsule's) radius.
        height: m, the height the rod's centre rises to.
        rise_frames: number of frames the rod takes to rise.
        pull: N per particle, the known outward pull on the opposite edge (theta["push"]); 0: none.
        pull_frames: number of leading frames during which the pull acts.
        estimate: the quantities (of LIFT_QUANTITIES) theta holds besides push.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment` (rendered with the depth temperature STACK_GAMMA).
    """
    r = 0.01  # particle radius: the cloth rests at y = r
    cloth = cloth_grid(cells, cells, side / cells, side / cells, pos=(-side / 2, r, -side / 2),
                       rot=quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2), mass=mass, tri_ke=tri_ke, tri_ka=tri_ke,
                       tri_kd=tri_kd, bend_ke=bend_ke)
    corner = -0.3 * side
    tilt = quat_from_axis_angle((1.0, 0.0, 1.0), np.pi / 2)  # the capsule's axis (its y) laid across the diagonal
    rod = collider("capsule", radius=radius, half_height=0.2 * side, rotation=tilt, ke=1.0e3, kd=10.0, kf=10.0,
                   mu=0.8, keyframes=[(0.0, (corner, -2.0 * radius, corner)),
                                      (rise_frames * frame_dt, (corner, height, corner))])
    topology, params, state0 = combine(cloth, rod).build(ground=True, contact_ke=1.0e3, contact_kd=10.0,
                                                         contact_kf=10.0, contact_mu=0.5, particle_radius=r)
    theta = default_theta(topology, params, state0, list(estimate))
    x = np.asarray(state0.particles.x)
    far = (x[:, 0] + x[:, 2]) > 0.7 * side  # the opposite corner's edge region
    force = np.zeros_like(x, dtype=np.float32)
    force[far] = pull * np.array([1.0, 0.0, 1.0]) / np.sqrt(2.0)
    theta["push"] = jnp.asarray(force)
    return finish_experiment("lift", topology, params, state0, theta, size=size, frames=frames, substeps=substeps,
                             frame_dt=frame_dt, push_frames=pull_frames if pull else 0, elevation=elevation,
                             azimuth=azimuth, gamma=STACK_GAMMA)
