"""The ODE bodies' demo scenes: gradSim's demo_pendulum and demo_double_pendulum (a pendulum's bobs drawn as
spheres on rods, swinging in the x-y plane, filmed from the front: the camera on -z, looking along +z) and
demo_bounce2d (a ball thrown sideways bouncing on the ground, exact impacts)."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.ode import BOB_COLORS, balls, pendulum
from gradsim_jax.render import FaceColors, look_at_camera
from gradsim_jax.render.mesh import scene_faces
from gradsim_jax.scenes.demos import finish_experiment
from gradsim_jax.sysid import default_theta

def _bob_colors(topology, params) -> FaceColors:
    """Each bob its link's colour (`BOB_COLORS`), the rods grey, anything else light grey."""
    import jax.numpy as jnp

    faces = scene_faces(topology)
    per_bob = len(topology.ode.system.bob_faces)
    k = int(np.shape(params.ode.length)[1])
    bobs = int(np.size(params.ode.length))
    rgb = [np.tile(BOB_COLORS[b % k % len(BOB_COLORS)], (per_bob, 1)) for b in range(bobs)]
    rgb.append(np.full((len(topology.ode.faces) - bobs * per_bob, 3), 0.35))
    rgb = np.concatenate(rgb)
    rgb = np.concatenate([np.full((len(faces) - len(rgb), 3), 0.8), rgb]).astype(np.float32)
    return FaceColors(jnp.asarray(rgb))


def pendulum_experiment(name: str, lengths, masses, theta, *, damping=0.0, gravity: float = 9.81, size: int = 64,
                        frames: int = 60, fps: float = 30.0, substeps: int = 4, bob_radius: float = 0.25):
    """The Experiment of one pendulum of len(lengths) links released at rest from angles `theta` rad.

    Args:
        name: the experiment's name.
        lengths: [k] m, the link lengths.
        masses: [k] kg, the bob masses.
        theta: [k] rad, initial angles from the downward vertical (counter-clockwise seen from +z).
        damping: N m s/rad, joint damping (one number or [k]).
        gravity: m/s^2, the magnitude of gravity (along -y).
        size: pixels, the image's width and height.
        frames: number of frames.
        fps: frames per second.
        substeps: simulation steps per frame.
        bob_radius: m, the radius of the spheres drawn as bobs.

    Returns:
        The `Experiment`; its theta holds pendulum_length, bob_mass, pendulum_damping and push.
    """
    scene = pendulum(lengths, masses, theta, damping=damping, bob_radius=bob_radius)
    topology, params, state0 = scene.build(gravity=(0.0, -gravity, 0.0))
    theta0 = default_theta(topology, params, state0, ["pendulum_length", "bob_mass", "pendulum_damping"])
    return finish_experiment(name, topology, params, state0, theta0, size=size, frames=frames, substeps=substeps,
                             frame_dt=1.0 / fps, elevation=0.0, azimuth=0.0,
                             colors=_bob_colors(topology, params), background=(1.0, 1.0, 1.0))


def simple_pendulum(*, size: int = 64, frames: int = 60, length: float = 1.0, damping: float = 0.05,
                    theta: float = 0.8):
    """gradSim's demo_pendulum: a 1 m pendulum with a 1 kg bob released from `theta` rad, 2 s at 30 fps;
    its joint damping `damping` N m s/rad makes the swing decay (about 10 % in 2 s).

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        length: m, the pendulum's length.
        damping: N m s/rad, the joint damping.
        theta: rad, the initial angle from the downward vertical.

    Returns:
        The `Experiment` (`pendulum_experiment`).
    """
    return pendulum_experiment("pendulum", [length], [1.0], [theta], damping=damping, size=size, frames=frames)


def double_pendulum(*, size: int = 64, frames: int = 50, lengths=(1.0, 1.0)):
    """gradSim's demo_double_pendulum: l1 = l2 = 1 m, m1 = m2 = 1 kg, g = 10 m/s^2, released from
    (3 pi / 7, 3 pi / 4), 50 frames at 30 fps, filmed from 8 m in front of the pivot (a 32 degree field of view:
    the 2 m reach of the chain fills the picture).

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        lengths: [2] m, the link lengths.

    Returns:
        The `Experiment` (`pendulum_experiment`) with that camera.
    """
    exp = pendulum_experiment("double_pendulum", list(lengths), [1.0, 1.0], [3 * np.pi / 7, 3 * np.pi / 4],
                              gravity=10.0, size=size, frames=frames)
    camera = look_at_camera(8.0, 0.0, 0.0, view_angle=16.0, width=size, height=size)
    return dataclasses.replace(exp, camera=camera)


def bounce(*, size: int = 64, frames: int = 100, speed: float = 1.0, gravity: float = -9.0, restitution: float = 0.8,
           radius: float = 0.75, height: float = 5.0):
    """gradSim's demo_bounce2d: a ball of radius 0.75 m released at a height of 5 m with a speed of 1 m/s along
    x, under g = -9 m/s^2, bouncing on the ground (restitution 0.8, exact impacts: `physics.ball`), 100 frames
    at 30 fps (two bounces), filmed from the front.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        speed: m/s, the initial velocity along x.
        gravity: m/s^2, gravity along y (negative: down).
        restitution: the coefficient of restitution of the impacts, in [0, 1].
        radius: m, the ball's radius.
        height: m, the initial height of the ball's centre.

    Returns:
        The `Experiment`; its theta holds ball_speed, gravity, ball_restitution and push.
    """
    scene = balls([0.0, height, 0.0], [speed, 0.0, 0.0], radius=radius, restitution=restitution)
    topology, params, state0 = scene.build(gravity=(0.0, gravity, 0.0))
    theta0 = default_theta(topology, params, state0, ["ball_speed", "gravity", "ball_restitution"])
    return finish_experiment("bounce", topology, params, state0, theta0, size=size, frames=frames, substeps=1,
                             frame_dt=1.0 / 30.0, elevation=0.0, azimuth=0.0, background=(1.0, 1.0, 1.0))
