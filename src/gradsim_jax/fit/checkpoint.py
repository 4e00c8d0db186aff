"""Fit state and its checkpoints: save atomically, load with checks, resume bit for bit.

A checkpoint is one numpy `.npz` file (no pickle) holding:
- `meta`: a JSON string: format tag and version, iteration, free field names, shapes and dtypes of every
  leaf, the optimizer state's tree structure, PRNG key kind, history layout, and caller extras;
- `u_<i>`: the unconstrained free parameters, in the order of `meta["free"]`;
- `opt_<i>`: the leaves of the optimizer state (`jax.tree_util.tree_leaves` order);
- `key`: the raw bits of the PRNG key (when the fit carries one);
- `hist_*`: the history so far;
- `x_<i>`: further named arrays of the caller, in the order of `meta["arrays"]` (a batched fit's per-member
  carry and its outputs so far: `fit.batched`; absent in a single fit's checkpoint).

A batched fit's checkpoint is the same file with a member axis: `meta["members"]` is N, every `u_<i>` and
`opt_<i>` leaf has a leading axis [N, ...], `meta["iteration"]` is the batched loop's iteration.

Leaves are stored with their exact bits, so a resumed fit continues from the very same state as if it
had never stopped. Writes go to a temporary file in the same directory, are fsynced, then renamed over
the old checkpoint (`os.replace` is atomic on POSIX), so a crash leaves the previous checkpoint or the
new one, never half a file. Loading checks the file against the current problem and raises
`CheckpointError` naming the file and the mismatch, rather than failing somewhere inside the optimizer.

The caller's extras may hold `metadata`: what the fit was made for (content hashes of its data from
`content_sha256`, its settings). `check_resume` compares it with the current problem's and raises
`CheckpointMismatch` listing each difference, so a run never continues a fit of another target.

Preemption: `preemptible()` installs a SIGTERM handler that only sets a flag; the fit loops
(`fit`, `fit_batched`) look at it at every iteration boundary (`stop_requested`), write their checkpoint there and
raise `Preempted`, which the command line turns into exit status `EXIT_PREEMPTED` (143, as a process killed by
SIGTERM reports); the Levenberg-Marquardt polishes stop before their next step (`stop_polish_if_asked`) and are
redone on resume. Without the handler installed nothing changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import tempfile
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

Array = Any

FORMAT = "gradsim_jax.fit.checkpoint"
VERSION = 1
CHECKPOINT_NAME = "checkpoint.npz"


class CheckpointError(Exception):
    """A checkpoint file is missing, unreadable, or does not belong to the problem being resumed."""


#: The exit status of a run stopped by SIGTERM after writing its checkpoint: 128 + SIGTERM, what a shell reports for
#: a process SIGTERM killed, so schedulers that requeue on it (SLURM's --requeue) treat both alike.
EXIT_PREEMPTED = 128 + signal.SIGTERM

_STOP = {"signal": None}  # the signal number a `preemptible` handler received, or None


class Preempted(Exception):
    """A fit stopped at an iteration boundary because the process received SIGTERM (`preemptible`).

    Attributes:
      path: the checkpoint written before stopping (None when the fit writes none).
      iteration: the iteration it holds (resume continues there).
      signum: the signal received.

    Args:
      path: as the attribute.
      iteration: as the attribute.
      signum: as the attribute.
      what: the loop that stopped, for the message ("fit", "batched fit", ...).
      where: what was saved, for the message (default: the checkpoint and its iteration).
    """

    def __init__(self, path: Optional[str], iteration: int, signum: int, what: str = "fit",
                 where: Optional[str] = None):
        self.path, self.iteration, self.signum = path, iteration, signum
        if where is None:
            where = f"checkpoint {path} holds iteration {iteration}" if path else "no checkpoint was asked for"
        super().__init__(f"{what} stopped by signal {signal.Signals(signum).name} at iteration {iteration}: {where}; "
                         "run again with --resume (resume=True) to continue")


@contextlib.contextmanager
def preemptible(signals: tuple = (signal.SIGTERM,)):
    """Within the block, SIGTERM (or the given signals) only sets a flag that the fit loops read at their next
    iteration boundary (`stop_requested`): they write their checkpoint and raise `Preempted`. The previous
    handlers come back on exit. Must be entered in the main thread (Python delivers signals there only), and
    after `jax.distributed.initialize` (`parallel.initialize_distributed`) in a multi-process job: jax's
    preemption notifier installs its own SIGTERM handler when it starts, in place of this one.

    Args:
        signals: the signal numbers to catch.

    Yields:
        None.
    """
    def handler(signum, frame):
        _STOP["signal"] = signum

    previous = {s: signal.signal(s, handler) for s in signals}
    _STOP["signal"] = None
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _STOP["signal"] = None


def stop_requested() -> Optional[int]:
    """The signal a `preemptible` handler received (the fit should checkpoint and stop), or None.

    Returns:
        int signal number, or None.
    """
    return _STOP["signal"]


def stop_polish_if_asked(step: int) -> None:
    """In a Levenberg-Marquardt polish (no state worth a checkpoint: it follows a completed Adam stage whose checkpoint
    is written, and a resumed run redoes it bit for bit): raise `Preempted` when a stop was requested.

    Args:
        step: the polish's accepted steps so far.
    """
    signum = stop_requested()
    if signum is not None:
        raise Preempted(None, step, signum, what="Levenberg-Marquardt polish",
                        where="a resumed run redoes the polish from the checkpoint of the Adam stage before it")


def request_stop(signum: int = signal.SIGTERM) -> None:
    """Set the flag `stop_requested` reads, as the handler of `preemptible` does (for callers that learn of a
    preemption otherwise, e.g. another process of the job).

    Args:
        signum: the signal number to report.
    """
    _STOP["signal"] = signum


class CheckpointMismatch(CheckpointError):
    """The checkpoint's metadata differs from the current problem's.

    Attributes:
      path: the checkpoint file.
      differences: {key: [the checkpoint's value, the current value]} for every key that differs.
    """

    def __init__(self, path: str, differences: dict, hint: str = "resume_anyway=True resumes regardless"):
        self.path = path
        self.differences = differences
        super().__init__(self.describe(hint))

    def describe(self, hint: str) -> str:
        """The message, ending with `hint` (how to resume regardless, in the caller's words).

        Args:
            hint: how to resume regardless, in the caller's words (e.g. "resume_anyway=True resumes regardless").

        Returns:
            str, "path: the checkpoint was made for other inputs (key: old in the checkpoint, new now; ...); hint".
        """

        def show(value):
            if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
                return f"content hash {value[:12]}"  # a sha256: its first digits are enough to tell them apart
            return json.dumps(value)

        changes = "; ".join(f"{key}: {show(old)} in the checkpoint, {show(new)} now"
                            for key, (old, new) in self.differences.items())
        return f"{self.path}: the checkpoint was made for other inputs ({changes}); {hint}"


class FitState(NamedTuple):
    """Everything an optimizer iteration reads and writes (a pytree).

    u: {field name: unconstrained array}, the free parameters only.
    opt_state: the optax state for `u`.
    key: PRNG key split once per iteration, or None when the fit carries none.
    iteration: int32 scalar, the number of optimizer updates applied so far.
    """

    u: dict[str, Array]
    opt_state: Any
    key: Optional[Array]
    iteration: Array


class Checkpoint(NamedTuple):
    """What `load_checkpoint` returns: the state, the history up to it, the caller's extras, the file, the
    caller's further arrays ({name: np.ndarray}, {} when none) and the number of members (None: a single fit)."""

    state: FitState
    history: dict
    extra: dict
    path: str
    arrays: Optional[dict] = None
    members: Optional[int] = None


def checkpoint_path(checkpoint_dir: str) -> str:
    """The file `fit` writes its checkpoint to inside `checkpoint_dir`.

    Args:
        checkpoint_dir: the folder of the checkpoint.

    Returns:
        str, the path of `CHECKPOINT_NAME` inside it.
    """
    return os.path.join(checkpoint_dir, CHECKPOINT_NAME)


def _leaf_spec(x: Array) -> list:
    x = np.asarray(x)
    return [list(x.shape), x.dtype.str]


def _is_typed_key(key: Array) -> bool:
    return jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key)


def _history_arrays(history: dict) -> tuple[dict, dict]:
    """Flatten a history {"iteration", "loss", "params": {name: [...]}} into npz arrays + a layout."""
    arrays = {
        "hist_iteration": np.asarray(history["iteration"], np.int64),
        "hist_loss": np.asarray(history["loss"], np.float64),
    }
    if "grad_norm" in history:
        arrays["hist_grad_norm"] = np.asarray(history["grad_norm"], np.float64)
    layout = {}
    for i, (name, values) in enumerate(history["params"].items()):
        is_float = all(isinstance(v, float) for v in values)
        layout[name] = "float" if is_float else "array"
        if is_float or not values:
            arrays[f"hist_p{i}"] = np.asarray(values, np.float64)
        else:
            arrays[f"hist_p{i}"] = np.stack([np.asarray(v) for v in values])
    return arrays, layout


def save_checkpoint(path: str, state: FitState, history: Optional[dict] = None, extra: Optional[dict] = None,
                    arrays: Optional[dict] = None, members: Optional[int] = None) -> str:
    """Write `state` (and `history`, `extra`, `arrays`) to `path` atomically; return `path`.

    Args:
      path: file to write (its directory is created if needed).
      state: the fit state; its arrays are copied to the host (a batched fit's with a member axis, its iteration
        the loop's scalar iteration).
      history: {"iteration": [int], "loss": [float], "params": {name: [float | np.ndarray]}}, or None.
      extra: JSON-serializable dict stored alongside (fit stores its transforms to check them on resume).
      arrays: {name: array} further arrays stored with their exact bits (`Checkpoint.arrays`), or None.
      members: the number of members of a batched fit's state (its leading axis), or None for a single fit.

    Returns:
      str, `path`.
    """
    history = history if history is not None else {"iteration": [], "loss": [], "params": {}}
    further = jax.device_get(arrays) if arrays else {}
    state = jax.device_get(state)
    free = list(state.u)
    opt_leaves, opt_def = jax.tree_util.tree_flatten(state.opt_state)
    arrays = {f"u_{i}": np.asarray(state.u[n]) for i, n in enumerate(free)}
    arrays.update({f"opt_{i}": np.asarray(x) for i, x in enumerate(opt_leaves)})
    key_meta = None
    if state.key is not None:
        typed = _is_typed_key(state.key)
        arrays["key"] = np.asarray(jax.random.key_data(state.key) if typed else state.key)
        key_meta = {"impl": str(jax.random.key_impl(state.key)) if typed else None}
    hist_arrays, hist_layout = _history_arrays(history)
    arrays.update(hist_arrays)
    names = list(further or {})
    arrays.update({f"x_{i}": np.asarray(further[n]) for i, n in enumerate(names)})
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "iteration": int(state.iteration),
        "free": free,
        "u": [_leaf_spec(state.u[n]) for n in free],
        "opt_treedef": str(opt_def),
        "opt": [_leaf_spec(x) for x in opt_leaves],
        "key": key_meta,
        "history": hist_layout,
        "extra": extra or {},
    }
    if names:
        meta["arrays"] = [[n, _leaf_spec(further[n])] for n in names]
    if members is not None:
        meta["members"] = int(members)
    arrays["meta"] = np.asarray(json.dumps(meta))

    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # Make the rename itself durable: fsync the directory entry.
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def _read(path: str) -> tuple[dict, dict]:
    """All arrays of the npz at `path` and its parsed meta; any read failure becomes CheckpointError."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no checkpoint file there")
    try:
        with np.load(path, allow_pickle=False) as z:
            # Members are read lazily; read them all here so a corrupt member fails inside this try.
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # zipfile, zlib, numpy format and OS errors all mean the same: unreadable.
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated or corrupted file?): {type(e).__name__}: {e}"
        ) from e
    if "meta" not in arrays:
        raise CheckpointError(f"{path}: not a gradsim_jax checkpoint (no 'meta' entry)")
    try:
        meta = json.loads(str(arrays["meta"][()]))
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{path}: the 'meta' entry is not valid JSON: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a gradsim_jax checkpoint (format {meta.get('format')!r})")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {meta.get('version')} is not supported (want {VERSION})")
    return arrays, meta


def content_sha256(tree: Any) -> str:
    """sha256 (hex) of a pytree's structure and of every leaf's dtype, shape and bytes: equal exactly when
    the contents are bit for bit equal. Leaves that are not arrays or numbers count by their repr.

    Args:
        tree: any pytree.

    Returns:
        str, 64 hex digits.
    """
    digest = hashlib.sha256()
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    digest.update(str(treedef).encode())
    for leaf in leaves:
        x = np.asarray(leaf)
        if x.dtype == object:
            digest.update(repr(leaf).encode())
            continue
        x = np.ascontiguousarray(x)
        digest.update(f"{x.dtype.str}{x.shape}".encode())
        digest.update(x.tobytes())
    return digest.hexdigest()


def check_resume(path: str, metadata: dict, resume_anyway: bool = False) -> tuple[Optional[dict], dict]:
    """Compare the metadata stored in the checkpoint at `path` with `metadata` (JSON-serializable).

    Args:
        path: the checkpoint file.
        metadata: the current problem's metadata (JSON-serializable; tuples compare as lists).
        resume_anyway: return the differences instead of raising CheckpointMismatch.

    Returns:
        (the checkpoint's metadata, or None when it stores none: written before metadata existed;
        {key: [checkpoint's value, current value]} for each key that differs).

    Raises:
      CheckpointMismatch: some key differs and not `resume_anyway`.
      CheckpointError: the file is missing or unreadable.
    """
    _, meta = _read(path)
    saved = meta.get("extra", {}).get("metadata")
    if saved is None:
        return None, {}
    current = json.loads(json.dumps(metadata))  # tuples as lists, as the checkpoint stores them
    keys = list(current) + [k for k in saved if k not in current]
    differences = {k: [saved.get(k), current.get(k)] for k in keys if saved.get(k) != current.get(k)}
    if differences and not resume_anyway:
        raise CheckpointMismatch(path, differences)
    return saved, differences


def _entry(path: str, arrays: dict, name: str, spec: list) -> np.ndarray:
    if name not in arrays:
        raise CheckpointError(f"{path}: entry {name!r} is missing")
    x = arrays[name]
    if [list(x.shape), x.dtype.str] != spec:
        raise CheckpointError(f"{path}: entry {name!r} has shape/dtype {[list(x.shape), x.dtype.str]}, meta says {spec}")
    return x


def _check_like(path: str, meta: dict, like: FitState) -> None:
    """Raise CheckpointError when the checkpoint's structure differs from the template state `like`."""
    free = list(like.u)
    if meta["free"] != free:
        raise CheckpointError(f"{path}: checkpoint is for free fields {meta['free']}, this fit has {free}")
    for n, spec in zip(free, meta["u"]):
        if _leaf_spec(like.u[n]) != spec:
            raise CheckpointError(
                f"{path}: field {n!r} has shape/dtype {spec} in the checkpoint, {_leaf_spec(like.u[n])} in this fit"
            )
    leaves, treedef = jax.tree_util.tree_flatten(like.opt_state)
    if meta["opt_treedef"] != str(treedef) or meta["opt"] != [_leaf_spec(x) for x in leaves]:
        raise CheckpointError(
            f"{path}: optimizer state does not match this fit's optimizer "
            f"({len(meta['opt'])} leaves {meta['opt_treedef']} vs {len(leaves)} leaves {treedef})"
        )
    def key_kind(has_key, typed):
        return "no PRNG key" if not has_key else ("a typed PRNG key" if typed else "a raw uint32 PRNG key")

    saved = key_kind(meta["key"] is not None, bool(meta["key"] and meta["key"]["impl"]))
    wanted = key_kind(like.key is not None, like.key is not None and _is_typed_key(like.key))
    if saved != wanted:
        raise CheckpointError(f"{path}: the checkpoint has {saved}, this fit has {wanted}")


def load_checkpoint(path: str, like: Optional[FitState] = None) -> Checkpoint:
    """Read a checkpoint written by `save_checkpoint`.

    Args:
      path: the `.npz` file.
      like: a state of the problem being resumed (e.g. a fresh one). When given, the checkpoint must
        match it (free fields, leaf shapes and dtypes, optimizer tree structure, key presence) and the
        optimizer state comes back as that pytree; otherwise `opt_state` is the list of its leaves.
    Returns:
      Checkpoint(state, history, extra, path, arrays, members); arrays are numpy (exact bits of what was saved).
    Raises:
      CheckpointError: missing, truncated or corrupted file, or a checkpoint of a different problem.
    """
    arrays, meta = _read(path)
    try:
        if like is not None:
            _check_like(path, meta, like)
        u = {n: _entry(path, arrays, f"u_{i}", spec) for i, (n, spec) in enumerate(zip(meta["free"], meta["u"]))}
        opt_leaves = [_entry(path, arrays, f"opt_{i}", spec) for i, spec in enumerate(meta["opt"])]
        if like is not None:
            opt_state = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(like.opt_state), opt_leaves)
        else:
            opt_state = opt_leaves
        key = None
        if meta["key"] is not None:
            if "key" not in arrays:
                raise CheckpointError(f"{path}: entry 'key' is missing")
            impl = meta["key"]["impl"]
            key = jax.random.wrap_key_data(arrays["key"], impl=impl) if impl else arrays["key"]
        history = {
            "iteration": [int(i) for i in arrays["hist_iteration"]],
            "loss": [float(v) for v in arrays["hist_loss"]],
            "params": {},
        }
        if "hist_grad_norm" in arrays:
            history["grad_norm"] = [float(v) for v in arrays["hist_grad_norm"]]
        for i, (name, kind) in enumerate(meta["history"].items()):
            values = arrays[f"hist_p{i}"]
            history["params"][name] = [float(v) for v in values] if kind == "float" else list(values)
        state = FitState(u=u, opt_state=opt_state, key=key, iteration=np.int32(meta["iteration"]))
        further = {n: _entry(path, arrays, f"x_{i}", spec) for i, (n, spec) in enumerate(meta.get("arrays", []))}
        return Checkpoint(state=state, history=history, extra=meta["extra"], path=path, arrays=further,
                          members=meta.get("members"))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: inconsistent checkpoint contents: {type(e).__name__}: {e}") from e
