"""Random restarts of a video fit: N starts around the initial guess, fitted at once, the best one kept.

An image loss of a motion can have several minima: a stiffness that makes the cloth oscillate one period
more or less over the video matches many frames too. A single start far off lands in the nearest one.
`fit_restarts` draws N starts around the initial guess (`gradsim_jax.fit.batched.random_starts`: member 0
is the guess itself; positive quantities log-uniform within a factor `spread`), runs the Adam stage of
`identify` on all of them as one batched fit (`fit_batched`, each start with its own optimizer state and
divergence guard; split over devices with a mesh), and ranks them by final loss. `gradsim-jax fit
--restarts N` then fits the best start again through the whole pipeline of `identify` (Adam, the
Levenberg-Marquardt polish, the report), so its outputs are those of a single fit from that start.

Checkpoints: with `checkpoints` (a `fit.options.Checkpoints`) the batched stage writes its checkpoint every
`every` iterations, at its end and on SIGTERM (`fit.checkpoint.preemptible`), and resumes from it bit for bit;
the command line keeps it in OUT/checkpoint/restarts, apart from the refit's OUT/checkpoint.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradsim_jax.compilation import current_backend
from gradsim_jax.fit.batched import BatchedFitResult, fit_batched, random_starts
from gradsim_jax.fit.checkpoint import content_sha256
from gradsim_jax.fit.options import Checkpoints
from gradsim_jax.sysid.experiment import Experiment, as_theta, with_data
from gradsim_jax.sysid.bounds import stable_bounds
from gradsim_jax.sysid.config import FitConfig, check_config, fit_inputs
from gradsim_jax.sysid.rounds import fit_loss
from gradsim_jax.sysid.quantities import focused
from gradsim_jax.sysid.quantities import QUANTITIES, canonical, transforms_for, with_camera_pose

Array = Any

#: Batching of the members when none is asked for: "vmap" on accelerators; on a CPU the one that
#: `benchmarks/bench_batched.py` measured fastest (benchmarks/results/batched.json).
DEFAULT_MODE = {"cpu": "map", "gpu": "vmap", "tpu": "vmap"}


@dataclasses.dataclass(frozen=True)
class RestartsResult:
    """starts: {quantity: [N, ...]} the starting values (member 0: the initial guess);
    fit: the batched Adam fit of all of them; free: the fitted quantities (canonical names)."""

    starts: dict
    fit: BatchedFitResult
    free: tuple

    @property
    def best(self) -> Optional[int]:
        """The member with the lowest final loss among those that did not diverge (None: all diverged)."""
        return self.fit.best

    def start(self, i: int) -> dict:
        """Starting values of a member.

        Args:
            i: the member (0: the initial guess).

        Returns:
            {quantity: value} in physical units.
        """
        return {n: np.asarray(v[i]) for n, v in self.starts.items()}

    def estimate(self, i: int) -> dict:
        """Fitted values of a member (after the batched Adam stage).

        Args:
            i: the member.

        Returns:
            {quantity: value} in physical units.
        """
        return {n: np.asarray(self.fit.history["final"][n][i]) for n in self.free}

    def summary(self, truth: Optional[dict] = None) -> dict:
        """JSON-ready: every member's start, estimate, final loss and divergence; the best; and the spread
        (min, median, max over the members that did not diverge) of the estimates and final losses.
        Quantities of more than 16 values are given by their mean.

        Args:
            truth: {quantity: true value}, added as "true" when given (a rendered target's), or None.

        Returns:
            the summary dict (report.json's "restarts").
        """
        fit = self.fit
        ok = ~fit.diverged & np.isfinite(fit.loss)

        def show(x):
            x = np.asarray(x, np.float64)
            return float(x) if x.ndim == 0 else (x.tolist() if x.size <= 16 else float(np.mean(x)))

        members = []
        for i in range(fit.members):
            m = {"start": {n: show(v) for n, v in self.start(i).items()},
                 "estimated": {n: show(v) for n, v in self.estimate(i).items()},
                 "final_loss": float(fit.loss[i]), "diverged": bool(fit.diverged[i])}
            if fit.diverged[i]:
                m["diverged_at"] = int(fit.diverged_at[i])
                m["diverged_fields"] = list(fit.diverged_fields[i])
            members.append(m)

        def spread(values):
            v = np.asarray(values, np.float64)
            return {"min": float(np.min(v)), "median": float(np.median(v)), "max": float(np.max(v))} if v.size else None

        out = {
            "restarts": fit.members, "best": self.best, "mode": fit.mode, "devices": fit.devices,
            "iterations": fit.iterations, "wall_time_s": fit.wall_time, "diverged": int(fit.diverged.sum()),
            "members": members,
            "spread": {n: spread([np.mean(self.estimate(i)[n]) for i in np.flatnonzero(ok)]) for n in self.free},
            "final_loss_spread": spread(fit.loss[ok]),
        }
        if truth is not None:
            out["true"] = {n: show(truth[n]) for n in self.free if n in truth}
        return out


def batch_mode(mode=None) -> str:
    """The batching a restarts' stage runs with: `mode` when given, else `DEFAULT_MODE` of the platform.

    Args:
        mode: "vmap", "map", "sequential", or None.

    Returns:
        The mode's name.
    """
    return mode if mode is not None else DEFAULT_MODE.get(current_backend(), "vmap")


def fit_restarts(exp: Experiment, target: Array, initial: dict, config: FitConfig, *, restarts: int,
                 spread: float = 3.0, key: Optional[Array] = None, mode: Optional[str] = None,
                 map_batch_size: Optional[int] = None, mesh: Any = None,
                 checkpoints: Optional[Checkpoints] = None) -> RestartsResult:
    """The Adam stage of `identify` (same loss, horizon, frame stride, smoothness, cosine-decayed learning rate
    and iterations as `config`) run from `restarts` starts drawn around `initial` at once.

    Args:
        exp: the experiment, as for `identify`.
        target: [frames + 1, H, W, 4] the target video.
        initial: {quantity: value} the initial guess, as for `identify`.
        config: the fit's settings, as for `identify`.
        restarts: number of starts N (>= 1); member 0 starts at `initial` itself.
        spread: factor of the range of the starts (> 1; see `random_starts`).
        key: `jax.random` key of the draws (default `jax.random.key(0)`).
        mode: the batching, as for `fit_batched`; None takes `DEFAULT_MODE` of the platform.
        map_batch_size: as for `fit_batched`.
        mesh: as for `fit_batched` (the devices to split the members over), or None.
        checkpoints: where the batched stage writes its checkpoints and whether it resumes (dir, every, resume,
            resume_anyway; its metadata is filled in here: the fit's inputs, the starts and the batching), or None
            for none.

    Returns:
        RestartsResult (`fit.resume` says where a resumed stage came from).

    Raises:
        ValueError: a bad setting, before compilation.
        CheckpointError: resume from a missing or unreadable checkpoint, or (CheckpointMismatch) from one made for
            other inputs without resume_anyway.
        Preempted: SIGTERM under `fit.checkpoint.preemptible` (the checkpoint is written first).
    """
    free = tuple(canonical(n) for n in config.free)
    check_config(config)
    if config.iterations < 1:
        raise ValueError("restarts need at least one Adam iteration (iterations >= 1)")
    exp, theta0 = focused(exp, as_theta(exp, with_camera_pose(exp, initial) if "camera_pose" in free else initial),
                          free)
    target = np.asarray(target, np.dtype(theta0["push"].dtype))
    tf = transforms_for(free)
    key = jax.random.key(0) if key is None else key
    draw_key, fit_key = jax.random.split(key)
    theta0, bounds = stable_bounds(exp, theta0, free)
    starts = random_starts({n: theta0[n] for n in free}, free, restarts, key=draw_key, spread=spread, transforms=tf)
    for n, (lo, hi) in bounds.items():  # a draw past the step's limit would blow up: it starts inside
        drawn = starts[n][1:]  # member 0 is the (bounded) start itself
        if hi is not None:
            drawn = jnp.minimum(drawn, jnp.asarray(0.9 * hi, drawn.dtype))
        if lo is not None:
            drawn = jnp.maximum(drawn, jnp.asarray(lo / 0.9, drawn.dtype))
        starts[n] = starts[n].at[1:].set(drawn)
    ramp = None if config.horizon is None else (config.horizon, config.iterations // 2)

    loss_fn = fit_loss(exp, config, ramp)

    mode = batch_mode(mode)
    if checkpoints is not None:
        metadata = {**fit_inputs(exp, target, theta0, config), "restarts": restarts, "spread": spread,
                    "starts": content_sha256(starts), "key": content_sha256(jax.random.key_data(fit_key)),
                    "mode": mode, "devices": 1 if mesh is None else int(mesh.devices.size)}
        checkpoints = dataclasses.replace(checkpoints, metadata=metadata)
    schedule = optax.cosine_decay_schedule(config.learning_rate, max(config.iterations, 1), alpha=0.02)
    result = fit_batched(loss_fn, with_data(theta0, exp, target), batch=starts, free=free, transforms=tf,
                         optimizer=optax.adam(schedule), steps=config.iterations, uses_iteration=ramp is not None,
                         key=fit_key, mode=mode, map_batch_size=map_batch_size, mesh=mesh, progress=config.progress,
                         bounds=bounds, checkpoints=checkpoints)
    return RestartsResult(starts={n: np.asarray(v) for n, v in starts.items()}, fit=result, free=free)


def table_lines(result: RestartsResult, truth: Optional[dict] = None) -> list[str]:
    """A console table: one row per start (start and fitted value of each scalar quantity, final loss), the
    best marked, then the spread of the estimates.

    Args:
        result: the restarts' `RestartsResult`.
        truth: {quantity: true value} to show beside the spread, or None.

    Returns:
        the table's lines.
    """
    free = [n for n in result.free if np.size(result.starts[n][0]) == 1]
    fit = result.fit
    width = {n: max(12, len(n) + 9) for n in free}
    head = "  start" + "".join(f"{(n + ' start'):>{width[n]}}{(n + ' fitted'):>{width[n]}}" for n in free)
    lines = [head + f"{'final loss':>13}"]
    for i in range(fit.members):
        start, est = result.start(i), result.estimate(i)
        row = f"  {i:>5}" + "".join(f"{float(start[n]):>{width[n]}.6g}{float(est[n]):>{width[n]}.6g}" for n in free)
        row += f"{fit.loss[i]:>13.4e}"
        if i == result.best:
            row += "  <- best"
        if fit.diverged[i]:
            row += f"  diverged at iteration {fit.diverged_at[i]} (frozen)"
        lines.append(row)
    summary = result.summary(truth)
    for n in free:
        s = summary["spread"][n]
        if s is not None:
            unit = QUANTITIES[n].unit
            true = f", true {summary['true'][n]:.6g}" if truth is not None and n in summary.get("true", {}) else ""
            lines.append(f"  {n}: fitted values from {s['min']:.6g} to {s['max']:.6g} {unit} (median {s['median']:.6g}"
                         f"{true})")
    s = summary["final_loss_spread"]
    if s is not None:
        lines.append(f"  final losses from {s['min']:.4e} to {s['max']:.4e} (median {s['median']:.4e})")
    return lines


__all__ = ["DEFAULT_MODE", "RestartsResult", "batch_mode", "fit_restarts", "table_lines"]
