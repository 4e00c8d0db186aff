"""Embedded rigid-body scenes of the system-identification demos (`gradsim-jax demo rigid-mass`,
`demo rigid-material`, `demo rigid-restitution`): gradSim's rigid experiments (Jatavallabhula et al.,
ICLR 2021, section 4, Tables 1 and 2).

Each builder returns a `gradsim_jax.sysid.Experiment` whose `theta` holds the true quantities:
- `rigid_mass`: gradSim's `demo_mass_known_shape`: a box of known shape released level, resting on the
  ground (or dropped, `height`), while a known force pushes it off-centre (spinning it) during the first
  frames. The push's effect is F / m, which no other parameter can mimic, so it is what makes the mass
  visible; the contact coefficients are known.
- `rigid_material`: estimating kf, mu or the mass, a box starting level on the ground with a horizontal
  velocity and a spin about the vertical, pulled by a known constant horizontal force (half of mu m g by
  default, against the initial velocity) at the centre of a side face at mid-height: it slides against
  Coulomb friction (mu), stops, and is drawn back in the viscous regime (kf |v_t| < mu f_n at every
  corner), creeping at F / (N kf) for most of the video (kf). The known force separates the mass from the
  contact coefficients, which otherwise act only as ke / m, kd / m, kf / m. No corner leaves the ground
  (the force's moment about a bottom edge is kept below a quarter of m g times the half base width), so the
  motion is smooth in the parameters: a box thrown onto the ground (the previous scene) lands on an edge,
  rocks or tumbles, and which corner strikes when depends on the parameters in jumps (loss jagged at the
  0.1-1 % scale, in float64 and with 4x substeps too). When only ke and kd are estimated the scene is the
  first bounce of a level drop instead: from 5 cm the contact lasts about one frame and its penetration is
  sub-pixel, so ke shows only through the rebound, whose height (the damped spring's restitution
  exp(-pi zeta / sqrt(1 - zeta^2)), zeta = kd / (2 sqrt(ke m / N)) for N corners) is a few millimetres;
  from 25 cm it is centimetres. The bounces after the first, tipping on an edge, make the loss jagged
  in ke on the scale of a percent, so that variant stops after the first bounce.
- `rigid_restitution`: the impulse contact model: a level cube spinning about the vertical dropped onto the
  ground bounces several times, each bounce's apex e^2 times the last. A tilted, tumbling cube's later
  bounces depend chaotically on e (the loss in e is then bumpy, with local minima); landing level, every
  bounce rebounds with exactly -e v_n and the spin keeps the motion symmetric.

Units SI, y up, the ground the plane y = 0. Render setup (`scenes.demos.finish_experiment`): per-face
checker colours (rotation shows inside the silhouette), an oblique light, a camera framed on the true
motion. Substeps are chosen for the penalty model's stability (`physics/rigid.py`): with N hull vertices
in contact, dt^2 ke N / m + 2 dt kd N / m < 4 and dt kf N / m < 2, with room for a mass guessed 50 % low.
"""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry import box_mesh, quat_from_axis_angle, rigid_body
from gradsim_jax.physics.quaternion import quat_to_matrix
from gradsim_jax.scenes.demos import finish_experiment
from gradsim_jax.sysid import Experiment, default_theta

#: Quantities each scene can estimate (its theta holds their true values).
MATERIAL_QUANTITIES = ("body_mass", "body_ke", "body_kd", "body_kf", "body_mu")

#: The quantities the first bounce shows: estimating only these, `rigid_material` is the bounce variant.
BOUNCE_QUANTITIES = ("body_ke", "body_kd")

#: The slide's default pull, as a fraction of mu m g (below 1: the box ends in the viscous regime).
SLIDE_PUSH = 0.5

GRAVITY = 9.81


def _tilted(axis, degrees: float):
    return tuple(float(c) for c in quat_from_axis_angle(axis, np.deg2rad(degrees)))


def penalty_stability(*, mass: float, ke: float, kd: float, kf: float, dt: float, contacts: int = 4) -> dict:
    """The penalty model's explicit-step numbers for `contacts` hull vertices in contact (each must stay
    below its limit: normal 4, friction 2).

    Args:
        mass: kg, the body's mass.
        ke: N/m, the contact stiffness.
        kd: N s/m, the contact damping.
        kf: N s/m, the friction's viscous slope.
        dt: s, the step.
        contacts: number of hull vertices in contact.

    Returns:
        {"normal": dt^2 ke N / m + 2 dt kd N / m, "friction": dt kf N / m} (dimensionless).
    """
    n = contacts / mass
    return {"normal": dt * dt * ke * n + 2.0 * dt * kd * n, "friction": dt * kf * n}


def rigid_mass(*, size: int = 64, frames: int = 24, substeps: int = 16, frame_dt: float = 1.0 / 30.0,
               mass: float = 1.0, half_extents=(0.15, 0.1, 0.1), push=(8.0, 0.0, 0.0),
               push_point=None, push_frames: int = 12, height: float = 0.0, tilt: float = 0.0, contact_ke: float = 1.0e4,
               contact_kd: float = 50.0, contact_kf: float = 50.0, contact_mu: float = 0.5,
               elevation: float = 25.0, azimuth: float = 30.0) -> Experiment:
    """A box of half extents `half_extents` m and `mass` kg, tilted `tilt` degrees about x, released `height` m
    above the ground (its lowest corner), pushed by `push` N (world frame) at `push_point` (body frame;
    default: the centre of its +z face, so the push also spins it about the vertical) during the first
    `push_frames` frames. Estimates body_mass. Level by default: a tilted box lands on an edge and rocks, and
    which corner strikes when depends on the mass in jumps (measured: the trajectory, and the loss, jagged
    on the 0.5 % scale, with gradients of the wrong sign within 1 % of the truth); level, it lands on its
    four corners at once and the trajectory is linear in the mass to within 1 %. Released resting on the
    ground by default (`height` 0): dropped from 5 cm, the landing bounce (corners leaving and striking the
    ground again while the push acts) still makes the loss jagged at the 0.1 % scale on other scenes
    (mass 2.5 kg: a local minimum 0.17 % off, gradients of the wrong sign 0.1 % off); sliding from rest, no
    corner leaves the ground and the loss is monotone on both sides of the truth.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        mass: kg, the box's mass.
        half_extents: [3] m, the box's half extents.
        push: [3] N, the known push (world frame).
        push_point: [3] m, where the push acts (body frame); None: the centre of the +z face.
        push_frames: number of leading frames during which the push acts.
        height: m, the release height of the lowest corner above the ground.
        tilt: degrees, the rotation about x.
        contact_ke: N/m, the penalty ground contact's stiffness.
        contact_kd: N s/m, the penalty contact's damping.
        contact_kf: N s/m, the friction's viscous slope.
        contact_mu: the Coulomb friction coefficient (dimensionless).
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment`; its theta holds body_mass and push.
    """
    body = _box(half_extents, rot=_tilted((1.0, 0.0, 0.0), tilt), height=height, mass=mass,
                contact_ke=contact_ke, contact_kd=contact_kd, contact_kf=contact_kf, contact_mu=contact_mu)
    point = (0.0, 0.0, half_extents[2]) if push_point is None else push_point
    scene = body.add_push(0, push, point=point, start=0.0, end=push_frames * frame_dt)
    topology, params, state0 = scene.build(ground=True, rigid_contact="penalty")
    theta = default_theta(topology, params, state0, ["body_mass"])
    return finish_experiment("rigid_mass", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, elevation=elevation, azimuth=azimuth)


def rigid_material(*, size: int = 64, frames: Optional[int] = None, substeps: int = 16, frame_dt: float = 1.0 / 30.0,
                   mass: float = 1.0, half_extents=(0.15, 0.08, 0.1), contact_ke: float = 2.0e3,
                   contact_kd: float = 10.0, contact_kf: float = 20.0, contact_mu: float = 0.4,
                   velocity=(1.5, 0.0, 0.3), omega=(0.0, 2.0, 0.0), height: Optional[float] = None,
                   tilt: Optional[float] = None, push=None, push_point=None, push_frames: Optional[int] = None,
                   estimate=MATERIAL_QUANTITIES, elevation: float = 30.0, azimuth: float = 20.0) -> Experiment:
    """A box of `mass` kg sliding on the ground with a known horizontal push `push` N (world frame) at
    `push_point` (body frame) during the first `push_frames` frames. `estimate`: the quantities theta holds
    (all of MATERIAL_QUANTITIES by default).

    Slide (the default unless `estimate` is within BOUNCE_QUANTITIES; estimates kf, mu, mass): the box
    starts level (`tilt` 0) at rest on the ground (`height` 0: its bottom face on it) with horizontal
    velocity `velocity` m/s and spin `omega` rad/s about the vertical, and is pulled during all `frames` (36)
    by a known constant force, by default SLIDE_PUSH x mu m g against its initial velocity, at the centre of
    the side face (mid-height) facing the force (like a tow line: the force turns the box towards it instead
    of away). It slides and spins against Coulomb friction (mu), stops, and is then drawn back in the
    viscous regime (each corner's kf |v_t| < mu f_n, since the force is below mu m g), creeping at
    F / (N kf) (N = 4 corners): the creep speed, some centimetres per second over most of the video, is what
    makes kf visible, the Coulomb deceleration mu g + F / m what makes mu and the mass visible. The force
    acts at mid-height, so its moment about a bottom edge (F times the half height) stays far below m g times
    the half base width (checked: at most a quarter of it) and no corner leaves the ground: the motion
    depends smoothly on the parameters. A box thrown onto the ground instead (the previous scene: 5 cm,
    tilted 3 degrees, a corner push) lands on an edge, rocks and, light, tumbles, and which corner strikes
    when depends on the parameters in jumps (measured: loss jagged at the 0.1-1 % scale, gradients of the
    wrong sign near the truth, kf off by 23 % and mu by 5 % on other scenes).

    Bounce (`estimate` within BOUNCE_QUANTITIES, ke and kd): the first bounce (16 frames) of a level drop
    from 25 cm with `velocity` and `omega` and a push (0, 0, -4) N on the corner at +`half_extents` during
    the first 4 frames: ke shows only through the rebound, whose height is centimetres from 25 cm.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames; None: 36 (slide) or 16 (bounce).
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        mass: kg, the box's mass.
        half_extents: [3] m, the box's half extents.
        contact_ke: N/m, the penalty ground contact's stiffness.
        contact_kd: N s/m, the penalty contact's damping.
        contact_kf: N s/m, the friction's viscous slope.
        contact_mu: the Coulomb friction coefficient (dimensionless).
        velocity: [3] m/s, the initial velocity (world frame).
        omega: [3] rad/s, the initial angular velocity (world frame).
        height: m, the release height of the lowest corner; None: 0 (slide) or 0.25 (bounce).
        tilt: degrees, the rotation about x; None: 0 (level).
        push: [3] N, the known push (world frame); None: the slide's pull or the bounce's corner push.
        push_point: [3] m, where the push acts (body frame); None: the facing side face's centre (slide) or
            the corner at +half_extents (bounce).
        push_frames: number of leading frames during which the push acts; None: all frames (slide) or 4.
        estimate: the quantities (of MATERIAL_QUANTITIES) theta holds besides push.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment`.

    Raises:
        ValueError: when the slide's push moment could tip the box.
    """
    bounce = set(estimate) <= set(BOUNCE_QUANTITIES)
    frames = (16 if bounce else 36) if frames is None else frames
    height = (0.25 if bounce else 0.0) if height is None else height
    tilt = 0.0 if tilt is None else tilt
    if bounce:
        push = (0.0, 0.0, -4.0) if push is None else push
        point = tuple(half_extents) if push_point is None else push_point
        push_frames = 4 if push_frames is None else push_frames
    else:
        if push is None:
            horizontal = np.array([velocity[0], 0.0, velocity[2]], np.float64)
            push = tuple(float(c) for c in -SLIDE_PUSH * contact_mu * mass * GRAVITY * horizontal
                         / np.linalg.norm(horizontal))
        point = _facing_face_centre(push, half_extents) if push_point is None else push_point
        push_frames = frames if push_frames is None else push_frames
        moment = np.hypot(push[0], push[2]) * half_extents[1]
        if moment > 0.25 * mass * GRAVITY * min(half_extents[0], half_extents[2]):
            raise ValueError(f"rigid_material: push moment {moment:.3g} N m about a bottom edge could tip the box "
                             f"(keep it below a quarter of m g times the half base width)")
    body = _box(half_extents, rot=_tilted((1.0, 0.0, 0.0), tilt), height=height, mass=mass, vel=velocity,
                omega=omega, contact_ke=contact_ke, contact_kd=contact_kd, contact_kf=contact_kf,
                contact_mu=contact_mu)
    scene = body.add_push(0, push, point=point, start=0.0, end=push_frames * frame_dt)
    topology, params, state0 = scene.build(ground=True, rigid_contact="penalty")
    theta = default_theta(topology, params, state0, list(estimate))
    return finish_experiment("rigid_material", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, elevation=elevation, azimuth=azimuth)


def _facing_face_centre(push, half_extents):
    """Body-frame centre of the side face (x or z, at mid-height) whose outward normal is closest to the
    horizontal force `push`."""
    axis = 0 if abs(push[0]) >= abs(push[2]) else 2
    point = [0.0, 0.0, 0.0]
    point[axis] = float(np.sign(push[axis]) or 1.0) * half_extents[axis]
    return tuple(point)


def rigid_restitution(*, size: int = 64, frames: int = 40, substeps: int = 8, frame_dt: float = 1.0 / 30.0,
                      mass: float = 1.0, half_extents=(0.1, 0.1, 0.1), restitution: float = 0.6,
                      contact_mu: float = 0.3, height: float = 0.6, velocity=(0.0, 0.0, 0.0),
                      omega=(0.0, 3.0, 0.0), tilt: float = 0.0, elevation: float = 10.0,
                      azimuth: float = 20.0) -> Experiment:
    """A cube of `mass` kg tilted `tilt` degrees about z, dropped from `height` m (lowest corner) with
    `velocity` m/s and spin `omega` rad/s onto the ground (impulse model, friction `contact_mu`): it bounces
    several times, each bounce `restitution` times the speed of the last. Estimates restitution.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        mass: kg, the cube's mass.
        half_extents: [3] m, the cube's half extents.
        restitution: the impulse model's coefficient of restitution, in [0, 1].
        contact_mu: the Coulomb friction coefficient (dimensionless).
        height: m, the release height of the lowest corner above the ground.
        velocity: [3] m/s, the initial velocity (world frame).
        omega: [3] rad/s, the initial angular velocity (world frame).
        tilt: degrees, the rotation about z.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment`; its theta holds restitution and push.
    """
    body = _box(half_extents, rot=_tilted((0.0, 0.0, 1.0), tilt), height=height, mass=mass, vel=velocity,
                omega=omega, contact_mu=contact_mu, restitution=restitution)
    topology, params, state0 = body.build(ground=True, rigid_contact="impulse")
    theta = default_theta(topology, params, state0, ["restitution"])
    return finish_experiment("rigid_restitution", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, elevation=elevation, azimuth=azimuth)


def _box(half_extents, *, rot, height: float, **kw):
    """A box body of half extents `half_extents` m at orientation `rot` (wxyz) placed with its lowest
    corner `height` m above the ground (its centre above the origin); `kw` go to `rigid_body`."""
    v, f = box_mesh(*half_extents)
    lowest = float(np.min(np.asarray(quat_to_matrix(jnp.asarray(rot, jnp.float32))) @ v.T, axis=1)[1])
    return rigid_body(v, f, pos=(0.0, height - lowest, 0.0), rot=rot, **kw)
