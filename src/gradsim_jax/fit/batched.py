"""Batched fits: N members (N videos, or N starts of one video) fitted at once, each on its own.

A member is one fit of `gradsim_jax.fit.fit`: the same loss function, free fields, transforms and
optimizer, with its own values of the fields named in `batch` (initial guesses of free fields for random
restarts; fixed fields such as the target video for N videos), its own optimizer state, its own PRNG key
(split from one key) and its own divergence guard. The iteration is `fit`'s own step (`make_step`),
lifted over members in one compiled program:

- "vmap": `jax.vmap` over members, one program on a batch. On a GPU the choice; on a CPU it wins when
  one member is too small to keep the cores busy (`benchmarks/bench_batched.py` measures it).
- "map": `lax.map` over members inside one program (`map_batch_size` members vmapped at a time): one
  compilation and one host round trip per iteration for all members, each member's arrays as small as
  in a single fit.
- "sequential": the members one after another, each a whole fit by the same compiled step: what N
  separate `fit` calls do, without compiling N times (the baseline, and the least memory).

Divergence: a member whose loss or gradient turns non-finite at iteration i is frozen at its parameters
of iteration i - 1 (the last finite ones; its starting ones when i = 0) and reported (`diverged`,
`diverged_at`, `diverged_fields`); the others go on. A frozen member still runs through the batched
program (at its frozen parameters) but its updates are discarded.

Devices: with `mesh` (`gradsim_jax.parallel.batch_mesh()`: every device of every process) the members are
split over the mesh's batch axis with `shard_map`; a batch that does not divide evenly is padded with
copies of member 0, dropped from the result. Each device runs "vmap" or "map" over its own members; no
member depends on another, so the result equals the single-device one (up to the vectorized arithmetic
of a different batch size). With several processes (`gradsim_jax.parallel.initialize_distributed`)
every process calls `fit_batched` with the same arguments and gets the whole result.

Checkpoints (`checkpoints=Checkpoints(dir, every, resume, ...)`, modes "vmap" and "map"): every `every` iterations,
at the end, and at the first iteration boundary after SIGTERM under `checkpoint.preemptible` (then `Preempted`),
the batched loop writes `fit.checkpoint`'s file with a member axis: every member's state (parameters, optimizer
state, key), the state before its last update and its frozen flag, and every iteration's outputs so far. A
resumed fit continues from there and ends with the very bits of an uninterrupted one. With several processes,
process 0 writes (after gathering every process's rows), all wait for it at a barrier, and on resume every
process reads the same file: the checkpoint folder must be on a file system they share. Every process looks at
the SIGTERM flag at every iteration boundary and they stop together (`parallel.any_process`).

Not here (use `fit` for one member): callbacks, traced `checks`, `has_aux`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from gradsim_jax.compilation import jit
from gradsim_jax.fit.batched_checkpoint import BatchedSaver, at_boundary, resume_batched
from gradsim_jax.fit.checkpoint import FitState
from gradsim_jax.fit.options import (BATCHED_SHORTHANDS, Checkpoints, LossCall, Optimization, Stopping, check_bounds,
                                     check_checkpoints, check_key, check_steps)
from gradsim_jax.fit.fit import free_transforms, make_step
from gradsim_jax.fit.transforms import (Bounded, Log, Softplus, TransformSpec, field_names, get_field, replace_fields,
                                        resolve_free)
from gradsim_jax.typing import grouped_options

Array = Any

MODES = ("vmap", "map", "sequential")


@dataclasses.dataclass(frozen=True)
class BatchedFitResult:
    """Outcome of `fit_batched` for N members.

    params: the full physical parameter tree; the free fields and the fields of `batch` carry a leading
      member axis [N, ...], the other fields are shared (`member(i)` gives member i's own tree).
    loss: [N] the loss at each member's final parameters (for a diverged member: at its frozen ones).
    history: {"iteration": [steps], "loss": [steps, N] (NaN where a member was frozen), "grad_norm":
      [steps, N], "params": {field: [steps, N, ...]} in physical units (fields of more than 64 elements
      by their mean), "final": {field: [N, ...]}}: numpy arrays.
    diverged: [N] bool; diverged_at: [N] the iteration whose loss or gradient was non-finite (-1: none);
    diverged_fields: per member, the free fields whose gradient was non-finite then (empty: the loss).
    best: index of the member with the lowest final loss among those that did not diverge (None if all did).
    iterations: optimizer updates applied to each member that did not diverge.
    wall_time: seconds, compilation included. mode: "vmap" | "map" | "sequential".
    devices: devices the members were split over (1 without a mesh).
    batched_fields: the fields that carry the member axis.
    timing: {"first_s": the first iteration, tracing and compilation included; "iteration_s": the median wall
      time of one later iteration of all members (sequential: of one member, times N)}.
    resume: None for a fresh start; on resume {"checkpoint": file, "from_iteration": int, "checkpoint_inputs": its
      metadata, "differences": {key: [the checkpoint's, this fit's]}, "resume_anyway": bool}.
    """

    params: Any
    loss: np.ndarray
    history: dict
    diverged: np.ndarray
    diverged_at: np.ndarray
    diverged_fields: tuple
    best: Optional[int]
    iterations: int
    wall_time: float
    mode: str
    devices: int
    batched_fields: tuple
    timing: dict = dataclasses.field(default_factory=dict)
    resume: Optional[dict] = None

    @property
    def members(self) -> int:
        return int(self.loss.shape[0])

    def member(self, i: int) -> Any:
        """Member i's full physical parameter tree (shared fields as given).

        Args:
          i: the member's index (negative counts from the end).

        Returns:
          The parameter tree of member i.
        """
        if not -self.members <= i < self.members:
            raise IndexError(f"member {i} of a batch of {self.members}")
        values = {n: jax.tree_util.tree_map(lambda x: x[i], get_field(self.params, n)) for n in self.batched_fields}
        return replace_fields(self.params, values)


def _member_count(batch: dict) -> int:
    sizes = {}
    for name, value in batch.items():
        for leaf in jax.tree_util.tree_leaves(value):
            shape = np.shape(leaf)
            if not shape:
                raise ValueError(f"batch[{name!r}] has a scalar leaf: every leaf needs a leading member axis")
            sizes.setdefault(shape[0], []).append(name)
    if len(sizes) != 1:
        raise ValueError("every leaf of batch needs the same leading member axis; got sizes "
                         + ", ".join(f"{n} for {sorted(set(v))}" for n, v in sorted(sizes.items())))
    (n,) = sizes
    if n < 1:
        raise ValueError("batch has 0 members")
    return n


def _index(tree, i):
    return jax.tree_util.tree_map(lambda x: x[i], tree)


def _is_typed_key(key) -> bool:
    return key is not None and jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key)


def fit_batched(
    loss_fn: Callable[..., Any],
    params: Any,
    *,
    batch: dict[str, Any],
    free: Optional[tuple[str, ...]] = None,
    transforms: Optional[dict[str, TransformSpec]] = None,
    optimization: Optional[Optimization] = None,
    stopping: Optional[Stopping] = None,
    loss_call: Optional[LossCall] = None,
    checkpoints: Optional[Checkpoints] = None,
    key: Optional[Array] = None,
    mode: str = "vmap",
    map_batch_size: Optional[int] = None,
    mesh: Any = None,
    progress: bool = True,
    **flat,
) -> BatchedFitResult:
    """Minimize `loss_fn` for N members at once; each member is the `fit` that `params` with its own `batch`
    values would be.

    Args:
      loss_fn: as for `fit` (`loss_fn(params[, key][, iteration])` -> scalar loss of one member's tree).
      params: the parameter tree (dataclass or dict), physical units: values shared by every member.
      batch: {field: values with a leading member axis [N, ...]}: per-member values of fields of `params`
        (a pytree value for a non-free field: every leaf with the member axis). Free fields in it are
        per-member initial guesses; free fields not in it start at `params`' value in every member.
      free: as for `fit`, the same for every member.
      transforms: as for `fit`, the same for every member.
      optimization: `Optimization` as for `fit` (optimizer, learning_rate, clip_norm, bounds: the same for every
        member, every member's start inside the bounds); its schedule and clip are `fit`'s only (ValueError),
        its backoff is not used (a diverged member is frozen).
      stopping: `Stopping`: steps as for `fit`; its ftol is `fit`'s only (ValueError).
      loss_call: `LossCall`: uses_key, uses_iteration as for `fit`; has_aux and checks are `fit`'s only
        (ValueError).
      checkpoints: `Checkpoints`: dir, every, resume, resume_anyway, metadata as for `fit` (module docstring; modes
        "vmap" and "map" only).
      key: PRNG key, split into one key per member (each then split every iteration, as `fit` does).
      mode: "vmap" | "map" | "sequential" (module docstring).
      map_batch_size: with mode "map", members vmapped together inside `lax.map` (None: one at a time).
      mesh: a `jax.sharding.Mesh` with axis `gradsim_jax.parallel.BATCH_AXIS` (`parallel.batch_mesh()`) to
        split the members over its devices; None: the default device.
      progress: a tqdm bar (the best loss so far and the number of live members); process 0 only.
      **flat: the records' fields by flat name (`BATCHED_SHORTHANDS`): optimizer, learning_rate, clip_norm,
        bounds, steps, uses_key, uses_iteration, checkpoint_dir, checkpoint_every, resume, resume_anyway, metadata.
        TypeError for another name, or for one given together with its record.
    Returns:
      BatchedFitResult.
    Raises:
      ValueError: bad arguments (unknown field, members of different counts, a start outside its
        transform's domain, a mode that does not exist or cannot be sharded), before compilation.
      CheckpointError: resume from a missing, unreadable or other problem's checkpoint (CheckpointMismatch: made
        for other inputs, unless resume_anyway).
      Preempted: SIGTERM under `checkpoint.preemptible`; the checkpoint of the iteration boundary is written.
    """
    from gradsim_jax import parallel

    started = time.perf_counter()
    options = grouped_options("fit_batched", {"optimization": (Optimization(), optimization),
                                              "stopping": (Stopping(), stopping), "loss_call": (LossCall(), loss_call),
                                              "checkpoints": (Checkpoints(), checkpoints)},
                              flat, BATCHED_SHORTHANDS)
    opt, stop, call, ckpt = (options[k] for k in ("optimization", "stopping", "loss_call", "checkpoints"))
    _check_batched(params, batch, opt, stop, call, key, mode, map_batch_size, mesh)
    check_checkpoints(ckpt)
    if ckpt.dir is not None and mode == "sequential":
        raise ValueError("checkpoints of a batched fit need mode 'vmap' or 'map' (all members advance together)")
    n_members = _member_count(batch)
    batch = {n: jax.tree_util.tree_map(jnp.asarray, v) for n, v in batch.items()}
    tf = _member_transforms(params, batch, free, transforms)
    box = check_bounds(opt.bounds, tf, {n: batch[n] if n in batch else get_field(params, n) for n in tf})
    optimizer = opt.transformation()
    carry, typed = _initial_carry(params, batch, tf, optimizer, key, n_members)
    batched_values = {n: batch[n] for n in batch if n not in tf}
    step = make_step(loss_fn, tf, optimizer, call.uses_key, call.uses_iteration, has_aux=False)
    member = _member_iteration(step, box, typed, None if not typed else jax.random.key_impl(key))
    n_pad = n_members if mesh is None else parallel.padded_size(n_members, mesh)
    saver = BatchedSaver.make(ckpt, tf, opt.bounds, mode, map_batch_size, n_members, n_pad, stop.steps)
    outs, resumed = [], None
    if ckpt.resume:
        carry, outs, resumed = resume_batched(saver, ckpt, carry)
    carry, batched_values = (_padded(tree, n_members, n_pad) for tree in (carry, batched_values))
    if mode == "sequential":
        outs, carry, times = _run_sequential(member, carry, batched_values, params, n_members, stop.steps, progress)
    else:
        outs, carry, times = _run_lifted(_lift(member, mode, map_batch_size, mesh), carry, batched_values, params,
                                         mesh, stop.steps, progress, saver, outs, resumed is not None)
    result = _result(outs, carry, tf, params, batch, n_members, stop.steps, mode,
                     1 if mesh is None else mesh.devices.size, started)
    timing = {"first_s": times[0] if times else float("nan"),
              "iteration_s": float(np.median(times[1:])) if len(times) > 1 else float("nan")}
    return dataclasses.replace(result, timing=timing, resume=resumed)


def _padded(tree, n_members: int, n_pad: int):
    """`tree` with its member axis padded to `n_pad` by copies of member 0 (dropped from the result)."""
    if n_pad == n_members:
        return tree
    return jax.tree_util.tree_map(
        lambda x: jnp.concatenate([x, jnp.broadcast_to(x[:1], (n_pad - n_members, *x.shape[1:]))]), tree)


def _check_batched(params, batch, opt: Optimization, stop: Stopping, call: LossCall, key, mode: str,
                   map_batch_size, mesh) -> None:
    """`fit_batched`'s ValueErrors for bad arguments, before anything is traced."""
    from gradsim_jax import parallel

    only_fit = [name for name, value in (("schedule", opt.schedule), ("clip", opt.clip), ("ftol", stop.ftol),
                                         ("has_aux", call.has_aux), ("checks", call.checks)) if value]
    if only_fit:
        raise ValueError(f"fit_batched does not take {', '.join(only_fit)} (use fit for one member)")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")
    check_steps(stop.steps)
    if map_batch_size is not None and (not isinstance(map_batch_size, (int, np.integer)) or map_batch_size < 1):
        raise ValueError(f"map_batch_size must be a positive int or None; got {map_batch_size!r}")
    check_key(call, key)
    if mesh is not None and mode == "sequential":
        raise ValueError("mode 'sequential' runs on one device; use 'vmap' or 'map' with a mesh")
    if mesh is not None and parallel.BATCH_AXIS not in mesh.axis_names:
        raise ValueError(f"mesh needs an axis named {parallel.BATCH_AXIS!r} (gradsim_jax.parallel.batch_mesh()); "
                         f"got axes {mesh.axis_names}")
    if not isinstance(batch, dict) or not batch:
        raise ValueError("batch must be a non-empty dict {field: values with a leading member axis}")
    names = field_names(params)
    unknown = [n for n in batch if n not in names]
    if unknown:
        raise ValueError(f"batch names unknown field(s) {unknown}; the parameters have fields {list(names)}")


def _member_transforms(params, batch: dict, free, transforms) -> dict:
    """The free fields and transforms of member 0's tree (`free_transforms`), every member's starts checked
    against the field's shape and the transform's domain."""
    tf = free_transforms(replace_fields(params, _index(batch, 0)), free, transforms)
    for n in tf:
        if n in batch:
            if np.shape(batch[n])[1:] != np.shape(get_field(params, n)):
                raise ValueError(f"batch[{n!r}] has member shape {np.shape(batch[n])[1:]}, the field has shape "
                                 f"{np.shape(get_field(params, n))}")
            tf[n].check_domain(n, batch[n])
    return tf


def _initial_carry(params, batch: dict, tf: dict, optimizer, key, n_members: int) -> tuple[dict, bool]:
    """Every member's starting carry ({"state", "prev", "frozen"}, built on the host side of jit: small) and
    whether `key` is a typed key (carried as its key data)."""

    def start(n, t):
        value = get_field(params, n)
        x0 = batch[n] if n in batch else jnp.broadcast_to(value, (n_members, *np.shape(value)))
        dtype = jnp.result_type(value)
        return jnp.asarray(t.forward(jnp.asarray(x0, dtype)), dtype)

    u0 = {n: start(n, t) for n, t in tf.items()}
    opt0 = jax.vmap(optimizer.init)(u0)
    typed = _is_typed_key(key)
    keys = None if key is None else jax.random.split(key, n_members)
    keydata = jax.random.key_data(keys) if typed else keys
    carry = {
        "state": FitState(u=u0, opt_state=opt0, key=keydata, iteration=jnp.zeros(n_members, jnp.int32)),
        "frozen": jnp.zeros(n_members, bool),
    }
    carry["prev"] = carry["state"]
    return carry, typed


def _member_iteration(step, box, typed: bool, impl) -> Callable:
    """One iteration of one member, `(carry, values, shared) -> (carry, outputs)`: `fit`'s step, its update kept
    only while the member is live (a typed key travels as key data of `impl`)."""

    def member(carry, values, shared):
        state = carry["state"]
        if typed:
            state = state._replace(key=jax.random.wrap_key_data(state.key, impl=impl))
        base = replace_fields(shared, values)
        new, loss, finite, record, _, _ = step(state, base, None, box)
        if typed:
            new = new._replace(key=jax.random.key_data(new.key))
        ok = jnp.all(finite)
        live = ok & ~carry["frozen"]
        newly = ~ok & ~carry["frozen"]

        def pick(n_, s_, p_):
            return jnp.where(live, n_, jnp.where(newly, p_, s_))

        out = {
            "state": jax.tree_util.tree_map(pick, new, carry["state"], carry["prev"]),
            "prev": jax.tree_util.tree_map(lambda s_, p_: jnp.where(live, s_, p_), carry["state"], carry["prev"]),
            "frozen": carry["frozen"] | ~ok,
        }
        return out, {"loss": loss, "finite": finite, "record": record, "frozen_before": carry["frozen"]}

    return member


def _lift(member: Callable, mode: str, map_batch_size, mesh) -> Callable:
    """`member` lifted over the members ("vmap" or "map"), and over `mesh`'s devices with `shard_map`."""
    from gradsim_jax import parallel

    if mode == "vmap":
        lifted = jax.vmap(member, in_axes=(0, 0, None))
    else:
        def lifted(carry_, values_, shared_):
            return jax.lax.map(lambda cv: member(cv[0], cv[1], shared_), (carry_, values_),
                               batch_size=map_batch_size)
    if mesh is not None:
        spec = jax.sharding.PartitionSpec(parallel.BATCH_AXIS)
        # No collective inside (members are independent), so the varying-axes type check is not needed
        # (it would also reject any custom primitive of a loss that does not propagate the axis types).
        lifted = jax.shard_map(lifted, mesh=mesh, in_specs=(spec, spec, jax.sharding.PartitionSpec()),
                               out_specs=spec, check_vma=False)
    return lifted


def _run_lifted(lifted: Callable, carry, batched_values, params, mesh, steps: int, progress: bool, saver: BatchedSaver,
                outs: list, resumed: bool):
    """Every member's iterations by one compiled program of all members, from iteration len(outs) (the outputs of
    a resumed fit's earlier iterations; `resumed`: the carry is a checkpoint's): ([steps + 1] outputs, the final
    carry, [seconds of each iteration])."""
    from gradsim_jax import parallel

    n_members = saver.n_members
    if mesh is not None:
        carry = parallel.put_batch(carry, mesh)
        batched_values = parallel.put_batch(batched_values, mesh)
        shared = parallel.put_replicated(params, mesh)
    else:
        shared = params
    compiled = jit(lifted)
    outs, times, start = list(outs), [], len(outs)
    bar = tqdm(total=steps, initial=start, disable=not progress or jax.process_index() != 0,
               desc="fit x%d" % n_members, unit="it", dynamic_ncols=True)
    try:
        with bar:
            for it in range(start, steps + 1):  # the last pass only evaluates the loss at the final parameters
                at_boundary(saver, it, start, resumed, carry, outs)
                tick = time.perf_counter()
                new_carry, out = compiled(carry, batched_values, shared)
                out = parallel.fetch(out)  # the one host transfer of the iteration
                times.append(time.perf_counter() - tick)
                outs.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:n_members], out))
                if len(outs) <= steps:
                    carry = new_carry
                    live = ~outs[-1]["frozen_before"] & np.all(outs[-1]["finite"], axis=-1)
                    best = np.min(outs[-1]["loss"][live]) if live.any() else float("nan")
                    bar.set_postfix(best=f"{best:.4e}", live=int(live.sum()), refresh=False)
                    bar.update(1)
        carry = parallel.fetch(carry)
    except Exception as error:
        parallel.await_watchdog(error)  # a collective failed: when another process died, the watchdog names it
        raise
    carry = jax.tree_util.tree_map(lambda x: np.asarray(x)[:n_members], carry)
    return outs, carry, times


def random_starts(params: Any, free: tuple[str, ...], n: int, *, key: Array, spread: float = 3.0,
                  transforms: Optional[dict[str, TransformSpec]] = None) -> dict[str, Array]:
    """N starting values of the free fields, drawn around their values in `params` (for random restarts).

    Member 0 is `params`' own value (so the best of the batch is never worse than the single start); each
    other member draws every element independently, from `key` only:
      - "log" / "softplus" fields (positive quantities): log-uniform in [x0 / spread, x0 * spread];
      - `Bounded(lo, hi)` fields: uniform in [u0 - ln(spread), u0 + ln(spread)] in the logit space u;
      - "identity" fields: uniform in x0 +- (spread - 1) |x0| (x0 = 0 stays 0).
    Args:
      params: parameter tree (physical units) holding the central values.
      free: the fields to draw.
      n: number of members (>= 1).
      key: a `jax.random` key.
      spread: > 1, the factor of the range (3: from a third to three times the central value).
      transforms: {field: transform} as for `fit` (unnamed: identity).
    Returns:
      {field: array [n, *field shape]} in each field's dtype, for `fit_batched(batch=...)`.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"the number of starts must be a positive int; got {n!r}")
    if not (np.isfinite(spread) and spread > 1.0):
        raise ValueError(f"spread must be a finite number > 1 (the factor of the range of the starts); got {spread}")
    tf = resolve_free(params, free, transforms)
    out = {}
    for name, k in zip(tf, jax.random.split(key, len(tf))):
        t = tf[name]
        x0 = jnp.asarray(get_field(params, name))
        r = jax.random.uniform(k, (n - 1, *x0.shape), minval=-1.0, maxval=1.0)
        if isinstance(t, (Log, Softplus)):
            draws = x0 * jnp.exp(r * np.log(spread))
        elif isinstance(t, Bounded):
            draws = t.inverse(t.forward(x0) + r * np.log(spread))
        else:
            draws = x0 + r * (spread - 1.0) * jnp.abs(x0)
        out[name] = jnp.concatenate([x0[None], draws.astype(x0.dtype)])
    return out


def _run_sequential(member, carry, values, shared, n_members, steps, progress):
    """Each member a whole fit by one compiled step (no batching): ([steps + 1] outputs stacked over members,
    the final carry, [first call, then the median iteration time of a member times N])."""
    compiled = jit(member)
    per_member, finals, first, later = [], [], None, []
    with tqdm(total=n_members * steps, disable=not progress or jax.process_index() != 0,
              desc=f"fit {n_members} one by one", unit="it", dynamic_ncols=True) as bar:
        for i in range(n_members):
            c, v = _index(carry, i), _index(values, i)
            outs = []
            for k in range(steps + 1):
                tick = time.perf_counter()
                new_c, out = compiled(c, v, shared)
                outs.append(jax.device_get(out))
                if first is None:
                    first = time.perf_counter() - tick
                else:
                    later.append(time.perf_counter() - tick)
                if k < steps:
                    c = new_c
                    bar.update(1)
            per_member.append(outs)
            finals.append(jax.device_get(c))
    outs = [jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *(m[k] for m in per_member))
            for k in range(steps + 1)]
    carry = jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *finals)
    return outs, carry, [first] + ([float(np.median(later)) * n_members] * 2 if later else [])


def _result(outs, carry, tf, params, batch, n_members, steps, mode, devices, started) -> BatchedFitResult:
    """Host-side bookkeeping: history, divergence report, best member, physical parameters."""
    names = list(tf)
    diverged_at = np.full(n_members, -1)
    diverged_fields: list[tuple] = [() for _ in range(n_members)]
    losses, grad_norms = [], []
    recorded: dict[str, list] = {n: [] for n in names}
    for it, out in enumerate(outs):
        finite = np.asarray(out["finite"])
        bad = ~np.all(finite, axis=-1) & ~np.asarray(out["frozen_before"])
        for i in np.flatnonzero(bad):
            diverged_at[i] = it
            diverged_fields[i] = tuple(n for n, ok in zip(names, finite[i, 1:]) if not ok)
        if it == steps:
            break
        frozen = np.asarray(out["frozen_before"]) | bad
        losses.append(np.where(frozen, np.nan, out["loss"]))
        grad_norms.append(np.where(frozen, np.nan, out["record"]["grad_norm"]))
        for n in names:
            recorded[n].append(np.asarray(out["record"][n]))
    final_out = outs[-1]
    diverged = diverged_at >= 0
    loss = np.asarray(final_out["loss"], np.float64)
    u = carry["state"].u
    final = {n: np.asarray(t.inverse(jnp.asarray(u[n]))) for n, t in tf.items()}
    history = {
        "iteration": list(range(steps)),
        "loss": np.asarray(losses, np.float64).reshape(steps, n_members),
        "grad_norm": np.asarray(grad_norms, np.float64).reshape(steps, n_members),
        "params": {n: np.asarray(recorded[n]) for n in names},
        "final": final,
    }
    ok = ~diverged & np.isfinite(loss)
    best = int(np.flatnonzero(ok)[np.argmin(loss[ok])]) if ok.any() else None
    values = {n: batch[n] for n in batch if n not in tf}
    values.update({n: jnp.asarray(final[n]) for n in tf})
    return BatchedFitResult(
        params=replace_fields(params, values), loss=loss, history=history, diverged=diverged,
        diverged_at=diverged_at, diverged_fields=tuple(diverged_fields), best=best,
        iterations=steps, wall_time=time.perf_counter() - started, mode=mode, devices=devices,
        batched_fields=tuple(sorted({*batch, *tf})))


__all__ = ["MODES", "BatchedFitResult", "fit_batched", "random_starts"]
