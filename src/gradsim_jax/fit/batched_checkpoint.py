"""A batched fit's checkpoints (`fit.batched.fit_batched`): `fit.checkpoint`'s file with a member axis.

The checkpoint of iteration i holds every member's `FitState` (`u_*`, `opt_*`, `key`: leading axis [N]; the
file's iteration is i), and as further arrays each member's own iteration count ("member_iteration"), its state
before its last update ("prev:<leaf>") and frozen flag ("frozen"), and the outputs of iterations 0 .. i - 1
("out:<json keys>", stacked [i, N, ...]): all a resumed loop needs to go on as if it had never stopped. With
several processes every process gathers the carry, process 0 writes, and all meet at a barrier.
"""

from __future__ import annotations

import dataclasses
import json
import signal
from typing import Optional

import jax
import numpy as np

from gradsim_jax import parallel
from gradsim_jax.fit.checkpoint import (CheckpointError, Preempted, check_resume, checkpoint_path, load_checkpoint,
                                        save_checkpoint, stop_requested)
from gradsim_jax.fit.options import Checkpoints


@dataclasses.dataclass(frozen=True)
class BatchedSaver:
    """A batched fit's checkpointing: the file (None: none), the interval, the checks' extras, the member counts
    (real and padded) and the iterations."""

    file: Optional[str]
    every: int
    extra: dict
    n_members: int
    n_pad: int
    steps: int

    @staticmethod
    def make(ckpt: Checkpoints, tf: dict, bounds, mode: str, map_batch_size, n_members: int, n_pad: int,
             steps: int) -> "BatchedSaver":
        """The saver of a batched fit; its extras record what a resumed fit must share with this one.

        Args:
            ckpt: the fit's `Checkpoints` (dir None: no file is written).
            tf: {free field: Transform} of the members.
            bounds: {field: (lo, hi)} physical bounds, or None.
            mode: "vmap" or "map".
            map_batch_size: the members vmapped together inside "map", or None.
            n_members: the batch's members N.
            n_pad: N padded to a multiple of the mesh's devices.
            steps: the fit's iterations.

        Returns:
            BatchedSaver.
        """
        extra = {"transforms": {n: repr(t) for n, t in tf.items()},
                 "batched": {"mode": mode, "map_batch_size": map_batch_size, "members": n_members, "padded": n_pad}}
        if bounds:
            extra["bounds"] = {n: [None if b is None else float(b) for b in bounds[n]] for n in sorted(bounds)}
        if ckpt.metadata is not None:
            extra["metadata"] = ckpt.metadata
        file = checkpoint_path(ckpt.dir) if ckpt.dir is not None else None
        return BatchedSaver(file, ckpt.every, extra, n_members, n_pad, steps)


def _out_name(path) -> str:
    """The checkpoint entry of an output leaf at `path` (nested dict keys)."""
    return "out:" + json.dumps([k.key for k in path])


def save_batched(saver: BatchedSaver, it: int, carry, outs: list) -> None:
    """Write the checkpoint of iteration `it`: the carry (gathered from every process; process 0 writes) and the
    outputs of iterations 0 .. it - 1; every process waits until it is written (a collective: every process calls
    it at the same iteration).

    Args:
        saver: the fit's saver (its file is not None).
        it: the iteration: `carry` holds the members after `it` updates.
        carry: {"state": FitState, "prev": FitState, "frozen": [N_pad] bool}, member axis first (device arrays).
        outs: the host outputs of iterations 0 .. it - 1 (each a nested dict of [N, ...] arrays).
    """
    host = jax.tree_util.tree_map(lambda x: np.asarray(x)[:saver.n_members], parallel.fetch(carry))
    if jax.process_index() == 0:
        state = host["state"]
        arrays = {"member_iteration": state.iteration, "frozen": host["frozen"]}
        arrays.update({f"prev:{i}": x for i, x in enumerate(jax.tree_util.tree_leaves(host["prev"]))})
        if outs:
            stacked = jax.tree_util.tree_map(lambda *xs: np.stack(xs), *outs)
            arrays.update({_out_name(path): x for path, x in jax.tree_util.tree_flatten_with_path(stacked)[0]})
        save_checkpoint(saver.file, state._replace(iteration=np.int32(it)), None, saver.extra, arrays=arrays,
                        members=saver.n_members)
    parallel.barrier(f"gradsim checkpoint {it}")


def _nested(items: list) -> dict:
    """{[k1, k2, ...] -> value} pairs as nested dicts."""
    out: dict = {}
    for keys, value in items:
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return out


def resume_batched(saver: BatchedSaver, ckpt: Checkpoints, carry) -> tuple:
    """The state a batched fit resumes from, after checking that the checkpoint was made for this fit.

    Args:
        saver: the fit's saver.
        ckpt: the fit's `Checkpoints` (metadata, resume_anyway).
        carry: this fit's fresh carry (unpadded, [N, ...]): the template of shapes, dtypes and tree structures.

    Returns:
        (the checkpoint's carry, the outputs of its iterations, `BatchedFitResult.resume`).

    Raises:
        CheckpointError: a missing or unreadable file, or one of another problem (CheckpointMismatch: other inputs).
    """
    metadata = ckpt.metadata
    saved, differences = (None, {}) if metadata is None else check_resume(saver.file, metadata, ckpt.resume_anyway)
    loaded = load_checkpoint(saver.file, like=carry["state"]._replace(iteration=np.int32(0)))
    for key in ("transforms", "bounds", "batched"):
        if loaded.extra.get(key) != saver.extra.get(key) and not (key == "batched" and ckpt.resume_anyway):
            raise CheckpointError(f"{saver.file}: the checkpoint was written with {key} {loaded.extra.get(key)}, this "
                                  f"fit has {saver.extra.get(key)}")
    it = int(loaded.state.iteration)
    if loaded.members != saver.n_members or it > saver.steps:
        raise CheckpointError(f"{saver.file}: the checkpoint holds {loaded.members} members at iteration {it}; this "
                              f"fit has {saver.n_members} members and {saver.steps} iterations")
    arrays = loaded.arrays
    prev_def = jax.tree_util.tree_structure(carry["prev"])
    prev = jax.tree_util.tree_unflatten(prev_def, [arrays[f"prev:{i}"] for i in range(prev_def.num_leaves)])
    state = loaded.state._replace(iteration=arrays["member_iteration"])
    stacked = _nested([(json.loads(n[4:]), x) for n, x in arrays.items() if n.startswith("out:")])
    outs = [jax.tree_util.tree_map(lambda x: x[k], stacked) for k in range(it)]
    resumed = {"checkpoint": saver.file, "from_iteration": it, "checkpoint_inputs": saved,
               "differences": differences, "resume_anyway": ckpt.resume_anyway}
    return {"state": state, "prev": prev, "frozen": arrays["frozen"]}, outs, resumed


def at_boundary(saver: BatchedSaver, it: int, start: int, resumed: bool, carry, outs: list) -> None:
    """At the top of iteration `it`: the checkpoint when due (every `every`, at the end), and after SIGTERM in any
    process the checkpoint, then `Preempted` (a collective in a multi-process job: every process calls it at every
    iteration).

    Args:
        saver: the fit's saver.
        it: the iteration: `carry` holds the members after `it` updates.
        start: the iteration the loop began at.
        resumed: the loop began from a checkpoint (of iteration `start`: not written again).
        carry: the members' carry (device arrays).
        outs: the host outputs of iterations 0 .. it - 1.
    """
    signum = stop_requested()
    stop = parallel.any_process(signum is not None) and it < saver.steps
    due = (it > start and it % saver.every == 0) or it == saver.steps or stop
    if saver.file is not None and due and not (resumed and it == start):
        save_batched(saver, it, carry, outs)
    if stop:
        raise Preempted(saver.file, it, signum if signum is not None else signal.SIGTERM, what="batched fit")


__all__ = ["BatchedSaver", "at_boundary", "resume_batched", "save_batched"]
