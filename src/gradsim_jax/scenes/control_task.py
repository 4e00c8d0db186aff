"""What a control task is (`ControlTask`: a scene, a policy and actuator, a target image and the objective) and
how a task's experiment and target image are made (`task_experiment`, `target_image`): shared by the control
demos of `scenes.control` and the locomotion demos of `scenes.locomotion`."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import jit
from gradsim_jax.control import policy_outputs, simulate_policy
from gradsim_jax.render import FaceColors, RenderSettings, look_at_camera
from gradsim_jax.render.colors import checker_colors
from gradsim_jax.render.mesh import scene_faces, scene_vertices
from gradsim_jax.scenes.demos import default_lights, reframe
from gradsim_jax.sysid.control import control_loss, pose_from_image
from gradsim_jax.sysid.experiment import Experiment, render_frames


@dataclasses.dataclass(frozen=True)
class ControlTask:
    """A control demo: the scene (`exp`: topology, params, state0, camera, colours, frames, substeps,
    frame_dt), the policy and actuator, the target image [H, W, 4], the target centre of mass [3] m, and the
    effort weight (the loss adds effort * mean(outputs^2) / amplitude^2). `init_scale`: the initial policy's
    `init_policy` scale (a gait's displacement is second order in the outputs, so its gradient vanishes
    near a zero policy: the locomotion demos start from a random policy of scale 1).

    `target_com` is the truth that scores a result (`com_error`, the reports); the objective never reads
    it. Its state term pulls to `state_target`, the centre of mass that the target image shows: where
    the body's start shape, placed rigidly, renders as the target (`target_pose`, `pose_from_image`)."""

    name: str
    exp: Experiment
    policy: Any
    actuator: Any
    target_image: np.ndarray
    target_com: np.ndarray
    effort: float
    description: str
    amplitude: float
    state_weight: float = 0.0
    state_scale: float = 0.1
    init_scale: float = 0.1

    def rollout(self, pp):
        """The task's scene rolled forward under the policy (`control.simulate_policy`).

        Args:
            pp: the policy's parameters (a pytree of `policy`).

        Returns:
            The `State` of every frame, leading axis frames + 1 (the initial one included).
        """
        e = self.exp
        return simulate_policy(e.topology, e.params, e.state0, pp, self.policy, self.actuator, frames=e.frames,
                               substeps=e.substeps, frame_dt=e.frame_dt)

    def loss(self, pp):
        """The objective: `control_loss` of the last frame's image against the target image, plus the effort
        term when `effort` is nonzero and the state term when `state_weight` is nonzero (class docstring).

        Args:
            pp: the policy's parameters (a pytree of `policy`).

        Returns:
            Scalar, the loss (dimensionless).
        """
        traj = self.rollout(pp)
        image = render_frames(self.exp, traj.particles.x[-1:])
        loss = control_loss(image, jnp.asarray(self.target_image, image.dtype)[None])
        if self.effort:
            out = policy_outputs(pp, self.policy, traj, frame_dt=self.exp.frame_dt)
            loss = loss + self.effort * jnp.mean(jnp.square(out)) / self.amplitude ** 2
        if self.state_weight:
            com = jnp.mean(traj.particles.x[-1], axis=0)
            loss = loss + self.state_weight * jnp.sum(jnp.square(com - jnp.asarray(self.state_target, com.dtype))) \
                / self.state_scale ** 2
        return loss

    @functools.cached_property
    def target_pose(self) -> dict:
        """`pose_from_image` of the start shape in the target image, computed once. Ask for it outside a trace
        (`run_demo` does, before training): `loss` reads it."""
        with jax.ensure_compile_time_eval():
            return pose_from_image(self.exp, self.exp.state0.particles.x, self.target_image, iterations=300)

    @property
    def state_target(self) -> np.ndarray:
        """The centre of mass [3] m that the target image shows (`target_pose`)."""
        return self.target_pose["com"]

    def com_error(self, pp):
        """Distance (m) between the final centre of mass and the target's.

        Args:
            pp: the policy's parameters (a pytree of `policy`).

        Returns:
            Scalar m, the distance between the last frame's particle mean and `target_com`.
        """
        x = self.rollout(pp).particles.x[-1]
        return jnp.linalg.norm(jnp.mean(x, axis=0) - jnp.asarray(self.target_com, x.dtype))

    def video(self, pp) -> tuple[np.ndarray, np.ndarray]:
        """(positions [T, n, 3], RGBA video [T, H, W, 4]) of the rollout under pp.

        Args:
            pp: the policy's parameters (a pytree of `policy`).

        Returns:
            (positions [T, n, 3] m, RGBA video [T, H, W, 4] in [0, 1]) as numpy arrays, T = frames + 1.
        """
        x = jit(lambda p: self.rollout(p).particles.x)(pp)
        return np.asarray(x), np.asarray(jit(lambda xs: render_frames(self.exp, xs))(x))


def _colors(topology, params, state0):
    faces = jnp.asarray(scene_faces(topology))
    return FaceColors(jnp.asarray(checker_colors(faces, scene_vertices(topology, params, state0))))


def task_experiment(name, topology, params, state0, points, *, size, frames, substeps, frame_dt, elevation,
                azimuth=0.0) -> Experiment:
    """The Experiment (camera framed on `points` [T, n, 3], checker colours, the demos' light) without
    simulating anything (`finish_experiment` simulates to frame the camera; here the start and the target
    poses frame it).

    Args:
        name: the experiment's name.
        topology: the built scene's `Topology` (`Scene.build`).
        params: the built scene's `Params`.
        state0: the built scene's initial `State`.
        points: [T, n, 3] m, the positions the camera frames (e.g. the start and the target poses).
        size: pixels, the image's width and height.
        frames: number of frames of the rollout.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment` (empty theta).
    """
    faces = jnp.asarray(scene_faces(topology))
    exp = Experiment(topology=topology, params=params, state0=state0,
                     camera=look_at_camera(3.0, elevation, azimuth, width=size, height=size), faces=faces,
                     colors=_colors(topology, params, state0), lights=default_lights(),
                     background=jnp.zeros(3, jnp.float32), settings=RenderSettings(), frames=frames,
                     substeps=substeps, frame_dt=frame_dt, theta={}, name=name)
    return reframe(exp, points, elevation=elevation, azimuth=azimuth)


def target_image(exp: Experiment, x_target) -> np.ndarray:
    """The RGBA image [H, W, 4] of the particles at x_target [n, 3] (a task's target).

    Args:
        exp: the task's `Experiment` (camera, colours, lights, render settings).
        x_target: [n, 3] m, the particle positions to render.

    Returns:
        [H, W, 4] numpy RGBA image in [0, 1].
    """
    return np.asarray(jit(lambda x: render_frames(exp, x[None]))(jnp.asarray(x_target, exp.dtype))[0])
