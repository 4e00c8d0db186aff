"""Control demos (`gradsim-jax demo control-fem`, `demo control-cloth`): train an explicit policy by gradient
descent through simulation and rendering so that the last rendered frame matches a target image, and compare
it with random policies (gradSim's control_fem and control_cloth experiments, Jatavallabhula et al. 2021).
`run_demo` also runs the locomotion demos of `scenes.locomotion` (control-walker, control-jellyfish).

- `gear_task`: a gear-shaped soft body (`gear_tets`, 144 tets) lying on the ground, slid along +x with
  1 m/s; by itself it stops after ~0.12 m. Its tets are activated in 8 groups (4 angular sectors x top and
  bottom layer) by a `PhasePolicy` (sinusoids of 1, 2, 4 Hz); swelling and contracting the sectors makes it
  hop and crawl. The target image shows the gear at rest 0.375 m further along x (behind where it stops by
  itself): the policy must carry it there.
- `cloth_task`: a 6 x 6 cloth lying 5 cm above the ground; a policy drives forces on its four corner
  particles during the first 0.3 s (a throw), then lets go; the target image shows the cloth lying flat on
  the ground 0.5 m along x and 0.25 m along z.

The objective is an image loss of the final frame against the target (`sysid.control.control_loss`:
RGBA MSE at several scales plus the silhouettes' centroids and sizes, so it still pulls when the shapes do
not overlap), a small effort penalty, and (both demos, by default; `state_weight=0` drops it) a STATE TERM:
|final centre of mass - the one the target image shows|^2 / (0.1 m)^2, that centre read from the image by
fitting the placement of the body's start shape to it (`ControlTask.target_pose`: the gear's within 0.04 mm,
the cloth's within 0.05 mm at 64 px). With the image loss alone the fits stall in local minima
(measured at the defaults: control-fem 47 mm final error, 5x below random; control-cloth 380 mm, 1.5x), so
the reports say which objective was used. The landscape is rough (contact, hopping): the learning rate is
cosine-decayed and the iterate of lowest objective is kept. The reported metric is the final
centre-of-mass error (m); random policies are `init_policy(key, scale=1)` (outputs spread over the whole
amplitude range), scored by the same error.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import jit
from gradsim_jax.control import PhasePolicy, init_policy, particle_force, random_policy_baseline, tet_activation
from gradsim_jax.geometry import cloth_grid, quat_from_axis_angle, soft_body
from gradsim_jax.geometry.tet_shapes import gear_tets
from gradsim_jax.scenes.control_task import ControlTask, target_image, task_experiment
from gradsim_jax.sysid.experiment import render_frames


@dataclasses.dataclass(frozen=True)
class WindowedPolicy:
    """A policy acting only while t < `until` (s); zero outputs afterwards (a throw, then let go)."""

    policy: Any
    until: float

    @property
    def num_inputs(self) -> int:
        return self.policy.num_inputs

    def __call__(self, params, t, state):
        out = self.policy(params, t, state)
        return jnp.where(t < self.until, out, jnp.zeros_like(out))


def gear_task(*, size: int = 64, frames: int = 45, substeps: int = 24, frame_dt: float = 1.0 / 30.0,
              offset: float = 0.375, speed: float = 1.0, amplitude: float = 0.4, effort: float = 1e-3,
              teeth: int = 6, elevation: float = 35.0, state_weight: float = 1.0) -> ControlTask:
    """The control-fem task (module docstring).

    Args:
      size: image size in pixels.
      frames: frames to simulate.
      substeps: simulation substeps per frame.
      frame_dt: s, the time between frames.
      offset: m, the target's distance along +x from the start.
      speed: m/s, the initial slide along +x.
      amplitude: the activations' bound.
      effort: weight of the effort penalty (effort * mean(output^2) / amplitude^2).
      teeth: the gear's teeth.
      elevation: degrees, the camera's elevation.
      state_weight: weight of the state term (0: the image loss and the effort only).

    Returns:
      the `ControlTask`.
    """
    x, t = gear_tets(teeth, 0.1, 0.15, 0.06, layers=2)
    x = np.asarray(x, np.float64)
    x = x - [0.0, x[:, 1].min() - 0.005, 0.0]
    body = soft_body(x, t, density=1000.0, k_mu=5.0e3, k_lambda=5.0e3, k_damp=5.0, vel=(speed, 0.0, 0.0),
                     name="gear")
    # contact_ke 3e3: stable with the lightest (tooth-tip) particles at these steps, gradients included.
    topology, params, state0 = body.build(ground=True, contact_ke=3.0e3, contact_kd=3.0, contact_kf=5.0,
                                          contact_mu=0.5, particle_radius=0.0)
    c = x[t].mean(1) - x.mean(0)
    sector = ((np.arctan2(c[:, 2], c[:, 0]) + np.pi) / (2 * np.pi) * 4).astype(int) % 4
    groups = sector * 2 + (c[:, 1] > 0)
    actuator = tet_activation(len(t), groups)
    policy = PhasePolicy(frequencies=(1.0, 2.0, 4.0), amplitude=amplitude)
    x_target = x + [offset, 0.0, 0.0]
    # Framed on the start and the target (the gear alone stops in between, ~0.12 m along).
    exp = task_experiment("control_fem", topology, params, state0, np.stack([x, x_target]), size=size,
                      frames=frames, substeps=substeps, frame_dt=frame_dt, elevation=elevation)
    return ControlTask("control-fem", exp, policy, actuator, target_image(exp, x_target), x_target.mean(0),
                       effort, f"a gear-shaped soft body ({len(t)} tets, 8 activation groups) slid along +x "
                       f"must crawl to the pose {offset} m from its start shown in the target image",
                       amplitude, state_weight=state_weight)


def cloth_task(*, size: int = 64, frames: int = 40, substeps: int = 32, frame_dt: float = 1.0 / 30.0,
               cells: int = 6, target=(0.5, 0.25), throw_time: float = 0.3, amplitude: float = 3.0,
               effort: float = 1e-3, state_weight: float = 1.0) -> ControlTask:
    """The control-cloth task (module docstring): the policy drives forces on the cloth's corners, then lets go.

    Args:
      size: image size in pixels.
      frames: frames to simulate.
      substeps: simulation substeps per frame.
      frame_dt: s, the time between frames.
      cells: cloth cells per side.
      target: (x, z) m, where the cloth should lie, from its start.
      throw_time: s, how long the policy drives the corners.
      amplitude: N per unit output, the forces' bound.
      effort: weight of the effort penalty (effort * mean(output^2) / amplitude^2).
      state_weight: weight of the state term (0: the image loss and the effort only).

    Returns:
      the `ControlTask`.
    """
    side = 0.3
    cell = side / cells
    scene = cloth_grid(cells, cells, cell, cell, pos=(-side / 2, 0.05, -side / 2),
                       rot=quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2), mass=0.02, tri_ke=200.0,
                       tri_ka=200.0, tri_kd=0.5, bend_ke=0.01)
    topology, params, state0 = scene.build(ground=True, contact_ke=1.0e3, contact_kd=10.0, contact_kf=20.0,
                                           contact_mu=0.5, particle_radius=0.005)
    n = scene.num_particles
    x = np.asarray(scene.x, np.float64)
    groups = np.full(n, -1, np.int32)
    corners = [0, cells, n - 1 - cells, n - 1]
    for g, i in enumerate(corners):
        groups[i] = g
    actuator = particle_force(n, groups, scale=1.0)
    policy = WindowedPolicy(PhasePolicy(frequencies=(1.0, 2.0), amplitude=amplitude), throw_time)
    x_target = x + [target[0], -0.05 + 0.005, target[1]]
    exp = task_experiment("control_cloth", topology, params, state0,
                      np.stack([x, x_target, x + [target[0] / 2, 0.2, target[1] / 2]]), size=size, frames=frames,
                      substeps=substeps, frame_dt=frame_dt, elevation=40.0)
    return ControlTask("control-cloth", exp, policy, actuator, target_image(exp, x_target), x_target.mean(0),
                       effort, f"a {cells} x {cells} cloth thrown by forces on its corners during the first "
                       f"{throw_time} s must land on the target ({target[0]}, {target[1]}) m shown in the "
                       f"target image", amplitude, state_weight=state_weight)


TASKS = {"control-fem": gear_task, "control-cloth": cloth_task}

#: Defaults per demo: frames, iterations, learning rate.
DEFAULTS = {"control-fem": {"frames": 45, "iterations": 150, "learning_rate": 0.05},
            "control-cloth": {"frames": 40, "iterations": 100, "learning_rate": 0.05},
            "control-walker": {"frames": 60, "iterations": 100, "learning_rate": 0.05},
            "control-jellyfish": {"frames": 60, "iterations": 100, "learning_rate": 0.05}}


def task_builder(name: str):
    """The task builder of demo `name`: `TASKS` here, the locomotion demos in `scenes.locomotion` (imported
    here, not above: it builds on `ControlTask`).

    Args:
      name: the demo ("control-fem", "control-cloth", "control-walker", "control-jellyfish").

    Returns:
      the builder, `builder(size=..., frames=...) -> ControlTask`.
    """
    if name in TASKS:
        return TASKS[name]
    from gradsim_jax.scenes.locomotion import TASKS as LOCOMOTION

    return LOCOMOTION[name]


@dataclasses.dataclass(frozen=True)
class _Trained:
    """A control demo's training (`_train`).

    Attributes:
      result: `train_policy`'s result (the last iterate).
      initial: the untrained policy's parameters.
      params: the trained policy: the iterate of lowest objective.
      loss: its objective.
      iteration: its iteration.
    """
    result: Any
    initial: Any
    params: Any
    loss: float
    iteration: Any


def _train(task: ControlTask, args, out, metadata: dict, iterations: int, lr: float) -> _Trained:
    """Train the task's policy (Adam, cosine-decayed `lr`), checkpointed in out/checkpoint; keep the best iterate."""
    import optax

    from gradsim_jax.control import train_policy

    pp0 = init_policy(jax.random.key(args.seed), task.policy.num_inputs, task.actuator.outputs,
                      scale=task.init_scale)
    schedule = optax.cosine_decay_schedule(lr, max(iterations, 1), alpha=0.05)
    best = {"loss": np.inf, "params": pp0, "iteration": None}

    def keep_best(it, params, loss, aux):  # the landscape is rough: keep the best iterate, not the last
        if loss < best["loss"]:
            best.update(loss=loss, params=params, iteration=it)

    result = train_policy(task.loss, pp0, lambda p: p, iterations=iterations, optimizer=optax.adam(schedule),
                          checkpoint_dir=str(out / "checkpoint"), checkpoint_every=args.checkpoint_every,
                          resume=args.resume, resume_anyway=args.resume_anyway, metadata=metadata,
                          progress=not args.no_progress, callback=keep_best)
    trained, trained_loss, best_iteration = result.params, result.loss, result.iterations
    if best["loss"] < result.loss:
        trained, trained_loss, best_iteration = best["params"], best["loss"], best["iteration"]
    return _Trained(result, pp0, trained, trained_loss, best_iteration)


def _rollouts(task: ControlTask, trained: _Trained) -> tuple:
    """Roll out and render the untrained and the trained policy: (untrained positions [frames + 1, n, 3] m,
    trained positions, untrained video [frames + 1, H, W, 4], trained video)."""
    exp = task.exp
    positions = jit(lambda p: task.rollout(p).particles.x)  # one compile for both policies
    render = jit(lambda xs: render_frames(exp, xs))
    x_untrained, x_trained = np.asarray(positions(trained.initial)), np.asarray(positions(trained.params))
    untrained_video, trained_video = np.asarray(render(x_untrained)), np.asarray(render(x_trained))
    return x_untrained, x_trained, untrained_video, trained_video


def _outputs(task: ControlTask, trained: _Trained, out, untrained_video, trained_video) -> dict:
    """Write untrained.gif, trained.gif, comparison.mp4, target.png and loss.png: {output: path}."""
    from gradsim_jax.render.video import write_comparison, write_gif, write_png
    from gradsim_jax.sysid.outputs.plots import plot_loss

    fps = min(50.0, 1.0 / task.exp.frame_dt)
    target_video = np.broadcast_to(task.target_image, trained_video.shape)
    return {
        "untrained": write_gif(out / "untrained.gif", untrained_video, fps),
        "trained": write_gif(out / "trained.gif", trained_video, fps),
        "comparison": write_comparison(out / "comparison.mp4", [target_video, untrained_video, trained_video],
                                       ["target", "untrained", "trained"], fps=fps),
        "target": write_png(out / "target.png", task.target_image),
        "loss": plot_loss(out / "loss.png", trained.result.history),
    }


def _objective(task: ControlTask) -> str:
    """The report's description of the task's objective."""
    return ("image loss of the final frame against the target image (sysid.control.control_loss: "
            "multi-scale RGBA MSE + silhouette centroid and size) + effort "
            f"{task.effort} * mean(output^2) / amplitude^2"
            + (f" + STATE TERM {task.state_weight} * |com - state target|^2 / ({task.state_scale} m)^2, "
               "the state target being the centre of mass the target image shows (the start shape placed "
               "rigidly to render as the target: state_target) (with the image loss alone the fit "
               "stalls in a local minimum: see scenes/control.py)"
               if task.state_weight else "; no state term"))


def _scores(trained_error: float, untrained_error: float, baseline: dict, n_random: int) -> dict:
    """The report's errors (m and gradSim's mean squared difference, m^2) of the trained, untrained and
    random policies, and their ratios."""
    return {
        "trained_final_error_m": trained_error,
        "trained_final_error_mse": trained_error ** 2 / 3,
        "untrained_final_error_m": untrained_error,
        "random_baseline": {"n": n_random, "policy_scale": 1.0, "mean_m": baseline["mean"],
                            "best_m": baseline["best"], "std_m": baseline["std"],
                            "values_m": baseline["values"].tolist(),
                            "mean_mse": float(np.mean(baseline["values"] ** 2) / 3)},
        "ratio_random_mean_over_trained": baseline["mean"] / max(trained_error, 1e-12),
        "ratio_random_best_over_trained": baseline["best"] / max(trained_error, 1e-12),
        "ratio_random_mean_over_trained_mse": float(np.mean(baseline["values"] ** 2)) / max(trained_error ** 2,
                                                                                              1e-24),
    }


def _report(name: str, task: ControlTask, trained: _Trained, scores: dict, settings: dict, out) -> dict:
    """report.json's content but its outputs and total wall time; settings: learning_rate, seed, size, frames."""
    from gradsim_jax import sysid

    result, exp = trained.result, task.exp
    return {
        "experiment": name,
        "task": task.description,
        "objective": _objective(task),
        "state_term": bool(task.state_weight),
        "state_target": None if not task.state_weight else {
            "com_m": task.state_target.tolist(), "translation_m": task.target_pose["translation"].tolist(),
            "yaw_rad": task.target_pose["yaw"], "image_loss": task.target_pose["loss"],
            "error_vs_true_target_com_m": float(np.linalg.norm(task.state_target - np.asarray(task.target_com)))},
        "metric": "final-frame centre-of-mass distance to the target's (m); gradSim's metric, the mean over "
                  "x, y, z of the squared difference (m^2), in *_mse",
        "target_com_m": np.asarray(task.target_com).tolist(),  # the truth, for scoring only
        **scores,
        "final_loss": result.loss,
        "trained_loss": trained.loss,
        "trained_policy": f"the iterate of lowest objective (iteration {trained.iteration}; the last is "
                          f"{result.iterations})",
        "initial_loss": float(result.history["loss"][0]) if result.history["loss"] else None,
        "iterations": result.iterations,
        "initial_policy_scale": task.init_scale,
        "learning_rate": settings["learning_rate"],
        "seed": settings["seed"],
        "size": settings["size"],
        "frames": settings["frames"],
        "substeps": exp.substeps,
        "frame_dt": exp.frame_dt,
        "training_wall_time_s": result.wall_time,
        "checkpoint": str(out / "checkpoint"),
        "command": f"demo {name}",
        "versions": sysid.package_versions(),
    }


def run_demo(args) -> int:
    """`gradsim-jax demo control-fem | control-cloth | control-walker | control-jellyfish`: build the task,
    train (checkpointed, resumable), score random policies, write untrained.gif, trained.gif, comparison.mp4,
    target.png, loss.png and report.json to args.out.

    Args:
      args: the parsed command line (`argparse.Namespace`: demo, out, size, frames, iterations, learning_rate,
        seed, random_policies, checkpoint_every, resume, resume_anyway, no_progress).

    Returns:
      0 (the exit status).
    """
    from gradsim_jax import sysid

    name = args.demo
    defaults = DEFAULTS[name]
    try:
        out = sysid.ensure_writable_folder(args.out)
    except ValueError as e:
        raise ValueError(f"--out: {e}") from None
    started = time.perf_counter()
    frames = args.frames or defaults["frames"]
    iterations = defaults["iterations"] if args.iterations is None else args.iterations
    lr = args.learning_rate or defaults["learning_rate"]
    task = task_builder(name)(size=args.size, frames=frames)
    print(f"demo {name}: {task.description} ({args.size} px, {frames} frames, {iterations} iterations)")
    if task.state_weight:
        pose = task.target_pose
        print(f"  the target image shows the centre of mass at {np.round(pose['com'], 4).tolist()} m (start shape "
              f"placed to match it; image loss {pose['initial_loss']:.3g} -> {pose['loss']:.3g})")
    settings = {"learning_rate": lr, "seed": args.seed, "size": args.size, "frames": frames}
    # Not the iteration count: --resume --iterations N continues a run to N (the cosine schedule then
    # follows the new N).
    metadata = {"demo": name, "size": args.size, "frames": frames, "learning_rate": lr, "seed": args.seed}
    trained = _train(task, args, out, metadata, iterations, lr)
    x_untrained, x_trained, untrained_video, trained_video = _rollouts(task, trained)

    def com_error(xs):
        return float(np.linalg.norm(xs[-1].mean(0) - np.asarray(task.target_com)))

    trained_error, untrained_error = com_error(x_trained), com_error(x_untrained)
    n_random = args.random_policies
    baseline = random_policy_baseline(jax.random.key(args.seed + 1), n_random, task.com_error,
                                      inputs=task.policy.num_inputs, outputs=task.actuator.outputs, scale=1.0)
    paths = _outputs(task, trained, out, untrained_video, trained_video)
    report = _report(name, task, trained, _scores(trained_error, untrained_error, baseline, n_random), settings, out)
    report["outputs"] = {k: str(v) for k, v in paths.items()}
    report["outputs"]["report"] = str(out / "report.json")
    report["total_wall_time_s"] = time.perf_counter() - started
    sysid.write_report(out / "report.json", report)
    print(f"  final centre-of-mass error: trained {trained_error * 1000:.1f} mm, untrained "
          f"{untrained_error * 1000:.1f} mm, {n_random} random policies mean {baseline['mean'] * 1000:.1f} mm "
          f"(best {baseline['best'] * 1000:.1f} mm): {report['ratio_random_mean_over_trained']:.1f}x below the "
          "random mean")
    print(sysid.outputs_line(out, report["total_wall_time_s"]))
    return 0


__all__ = ["ControlTask", "DEFAULTS", "TASKS", "WindowedPolicy", "cloth_task", "gear_task", "run_demo", "task_builder"]
