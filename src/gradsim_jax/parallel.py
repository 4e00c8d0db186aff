"""Devices and hosts: a mesh over the batch axis, batches laid out on it, and `jax.distributed` start-up.

A batched fit (`gradsim_jax.fit.batched.fit_batched`) shards its members over a one-dimensional
`jax.sharding.Mesh` whose single axis, `BATCH_AXIS`, runs over every device of every process: member i
lives on device i // (members per device). Members never talk to each other, so the compiled step has no
collective in it; the only cross-device traffic is the host fetching each iteration's few numbers
(`fetch`, an all-gather between processes when there are several).

Several hosts: every process runs the same program on the same inputs (so the same batch, drawn from the
same key), after `initialize_distributed`; `jax.devices()` then lists every process's devices, a
`batch_mesh` spans them all, and `put_batch` hands each process the rows of its own devices. On a CPU,
jax's cross-process collectives go through gloo (`jax_cpu_collectives_implementation`, the default since
jax 0.4.3x); on GPUs through NCCL. docs/howto/scaling.md has the recipes for one multi-GPU node and for SLURM.

A process that dies: the others would wait in their next collective (NCCL waits for ever; gloo fails at
once with a bare "connection reset"), and jax's own coordination service only notices after its heartbeat
timeout (100 s by default) and then aborts with a stack trace. `initialize_distributed` therefore starts a
`watchdog`: a thread in every process that bumps this process's counter in the coordination service's
key-value store every `WATCHDOG_INTERVAL_S` and reads the others'; when one stops changing for `watchdog_s`
seconds (or the coordinator, process 0, stops answering), it prints a line naming that process and ends
this one with status `EXIT_PROCESS_LOST`. `await_watchdog` lets a caller whose collective failed wait for the
watchdog's verdict instead of printing the collective's error.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

Array = Any

#: Name of the mesh axis the members of a batched fit are split along.
BATCH_AXIS = "batch"

#: Environment variables read by `initialize_distributed` when its arguments are not given.
ENV_COORDINATOR = "GRADSIM_COORDINATOR"
ENV_NUM_PROCESSES = "GRADSIM_NUM_PROCESSES"
ENV_PROCESS_ID = "GRADSIM_PROCESS_ID"

#: Exit status of a process that stops because another process of its job died (BSD's EX_SOFTWARE + 1: 71 is
#: "system error"; 75, EX_TEMPFAIL, "try again later": a requeued job can resume from its checkpoint).
EXIT_PROCESS_LOST = 75

#: Seconds between two heartbeats of the watchdog.
WATCHDOG_INTERVAL_S = 0.5

#: Seconds without a heartbeat after which the watchdog declares a process dead (`initialize_distributed`).
WATCHDOG_TIMEOUT_S = 30.0

_LOST = {"process": None, "event": threading.Event()}  # what the watchdog found


def initialize_distributed(coordinator: Optional[str] = None, num_processes: Optional[int] = None,
                           process_id: Optional[int] = None, *, local_device_ids: Optional[Sequence[int]] = None,
                           timeout_s: int = 300, watchdog_s: Optional[float] = WATCHDOG_TIMEOUT_S) -> dict:
    """Join a multi-process JAX job (`jax.distributed.initialize`); call it before anything touches a device.

    Args:
      coordinator: "host:port" of process 0's coordinator service (every process passes the same one).
      num_processes: number of processes in the job (>= 1).
      process_id: this process's index in [0, num_processes).
      local_device_ids: the local devices this process uses (default: all it sees).
      timeout_s: seconds to wait for every process to join.
      watchdog_s: seconds without a heartbeat of another process after which this one stops with a message
        naming it (`watchdog`); None starts no watchdog.
    A SIGTERM handler set in Python before the call (`gradsim_jax.fit.preemptible`) is set again after it: jax's
    preemption notifier installs its own when the job starts.
    The three main arguments default to the environment variables GRADSIM_COORDINATOR,
    GRADSIM_NUM_PROCESSES and GRADSIM_PROCESS_ID; when none is given there either, jax detects the cluster
    itself (SLURM: SLURM_JOB_ID, SLURM_NTASKS, SLURM_PROCID, the first node of SLURM_STEP_NODELIST as the
    coordinator; also Open MPI and cloud TPU environments).
    Returns:
      {"process_index", "process_count", "local_devices", "devices"}.
    Raises:
      ValueError: only some of the three given, a malformed coordinator or out-of-range ids, before jax starts.
    """
    coordinator = coordinator if coordinator is not None else os.environ.get(ENV_COORDINATOR)
    if num_processes is None and os.environ.get(ENV_NUM_PROCESSES):
        num_processes = _env_int(ENV_NUM_PROCESSES)
    if process_id is None and os.environ.get(ENV_PROCESS_ID):
        process_id = _env_int(ENV_PROCESS_ID)
    given = [v is not None for v in (coordinator, num_processes, process_id)]
    if any(given) and not all(given):
        raise ValueError("give all of coordinator (host:port), num_processes and process_id, or none of them "
                         "(then the cluster's environment, e.g. SLURM's, says them)")
    if coordinator is not None:
        host, _, port = coordinator.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"coordinator must be host:port (e.g. node001:12355), got {coordinator!r}")
        if not (isinstance(num_processes, (int, np.integer)) and num_processes >= 1):
            raise ValueError(f"num_processes must be an integer >= 1, got {num_processes!r}")
        if not (isinstance(process_id, (int, np.integer)) and 0 <= process_id < num_processes):
            raise ValueError(f"process_id must be an integer in [0, {num_processes}), got {process_id!r}")
    handler = signal.getsignal(signal.SIGTERM)
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id,
                               local_device_ids=local_device_ids, initialization_timeout=timeout_s)
    if callable(handler):  # jax's preemption notifier took SIGTERM over: give it back to the Python handler set
        signal.signal(signal.SIGTERM, handler)
    if watchdog_s is not None and jax.process_count() > 1:
        watchdog(watchdog_s)
    return {"process_index": jax.process_index(), "process_count": jax.process_count(),
            "local_devices": jax.local_device_count(), "devices": jax.device_count()}


def _env_int(name: str) -> int:
    text = os.environ[name]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {text!r}") from None


def batch_mesh(devices: Optional[Sequence[Any]] = None) -> Mesh:
    """A one-dimensional mesh with axis `BATCH_AXIS` over `devices` (default: every device of every process,
    `jax.devices()`).

    Args:
        devices: the jax devices to span, in mesh order; None for `jax.devices()` (ValueError when empty).

    Returns:
        A `jax.sharding.Mesh` of shape [len(devices)] with the single axis `BATCH_AXIS`.
    """
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("batch_mesh needs at least one device")
    return Mesh(np.asarray(devices, dtype=object), (BATCH_AXIS,))


def padded_size(members: int, mesh: Mesh) -> int:
    """The batch size rounded up to a multiple of the mesh's devices (every device holds as many members).

    Args:
        members: the number of batch members.
        mesh: the mesh the batch is split over.

    Returns:
        int, the smallest multiple of the mesh's device count that is >= `members`.
    """
    devices = mesh.devices.size
    return -(-members // devices) * devices


def put_batch(tree: Any, mesh: Mesh) -> Any:
    """Host arrays with a leading member axis (a multiple of the mesh's size) -> global arrays split along it.

    Every process passes the same full arrays and keeps only the rows of its own devices, so this works
    for one process and for many alike.

    Args:
        tree: a pytree of host arrays, each [members, ...] with members a multiple of the mesh's device count.
        mesh: a `batch_mesh`.

    Returns:
        The same pytree of global jax arrays, each sharded along its leading axis over `BATCH_AXIS`.
    """
    sharding = NamedSharding(mesh, PartitionSpec(BATCH_AXIS))
    return jax.tree_util.tree_map(lambda x: _global(x, sharding), tree)


def put_replicated(tree: Any, mesh: Mesh) -> Any:
    """Host arrays -> global arrays with a full copy on every device of the mesh.

    Args:
        tree: a pytree of host arrays (any shapes).
        mesh: a `batch_mesh`.

    Returns:
        The same pytree of global jax arrays, replicated on every device of `mesh`.
    """
    sharding = NamedSharding(mesh, PartitionSpec())
    return jax.tree_util.tree_map(lambda x: _global(x, sharding), tree)


def _global(x, sharding):
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def fetch(tree: Any) -> Any:
    """Device arrays -> numpy on this host: `jax.device_get` in one process; with several, an all-gather
    (`multihost_utils.process_allgather`), since each process holds only its own devices' rows.

    Args:
        tree: a pytree of jax arrays (global arrays when there are several processes).

    Returns:
        The same pytree of numpy arrays, each whole (every process's rows).
    """
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


def any_process(flag: bool) -> bool:
    """Whether `flag` is true in any process of the job (a collective: every process must call it at the same
    point; in a single process, `flag` itself).

    Args:
        flag: this process's value.

    Returns:
        bool, the logical or over the processes.
    """
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.asarray([bool(flag)]), tiled=True)))


def barrier(name: str) -> None:
    """Wait until every process of the job reaches the barrier `name` (nothing in a single process).

    Args:
        name: the barrier's name, the same in every process.
    """
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _client():
    from jax._src import distributed  # the coordination service's client: no public accessor in jax 0.10

    return distributed.global_state.client


def _report_lost(me: int, count: int, lost: int, silent_s: float, what: Optional[str] = None) -> None:
    """Print the line naming the lost process and end this one (`EXIT_PROCESS_LOST`)."""
    who = "the coordinator (process 0)" if lost == 0 else f"process {lost}"
    silence = f"no heartbeat for {silent_s:.1f} s" if silent_s else "its coordination service is gone"
    happened = what or f"stopped responding ({silence}): it died or was killed"
    print(f"gradsim-jax: {who} of the {count}-process job {happened}; process {me} stops too (exit status "
          f"{EXIT_PROCESS_LOST}). Rerun the job with --resume to continue from the last checkpoint.", file=sys.stderr,
          flush=True)
    _LOST["process"] = lost
    _LOST["event"].set()
    os._exit(EXIT_PROCESS_LOST)  # not sys.exit: jax's shutdown would wait in a barrier for the dead process


def watchdog(timeout_s: float = WATCHDOG_TIMEOUT_S, interval_s: float = WATCHDOG_INTERVAL_S) -> threading.Thread:
    """Start the daemon thread that watches the other processes of a `jax.distributed` job (module docstring).

    Every `interval_s` it increments this process's counter "gradsim/heartbeat/<id>" in the coordination
    service and reads every other's (one directory read); a counter unchanged for `timeout_s` seconds, or a
    coordination service that does not answer for as long, ends this process with a line naming the lost one
    and `EXIT_PROCESS_LOST`. A process that ends says so first ("gradsim/exit/<id>": "ok", or "error" after an
    uncaught exception): one that ended well is no longer watched (once process 0 has, nothing is), one that
    failed stops the others at once.

    Args:
        timeout_s: seconds of silence that mean a process is lost (> interval_s; long enough for the longest
            pause of a live process: a compilation holds no lock the thread needs, but a loaded machine may be slow).
        interval_s: seconds between heartbeats.

    Returns:
        The started thread.
    """
    if not timeout_s > interval_s > 0:
        raise ValueError(f"the watchdog needs timeout_s > interval_s > 0; got {timeout_s}, {interval_s}")
    client, me, count = _client(), jax.process_index(), jax.process_count()
    _say_how_this_process_ends(client, me)

    def watch():
        seen = {j: (None, time.monotonic()) for j in range(count) if j != me}
        reached = time.monotonic()
        while seen:
            beats, exits = _read_peers(client, me)
            now = time.monotonic()
            reached = now if beats is not None else reached
            for j, how in (exits or {}).items():
                if how == "error" and j in seen:
                    _report_lost(me, count, j, 0.0, "stopped with an error")
                seen.pop(j, None)
            if 0 in (exits or {}):  # the coordinator ended well: its service is going away, nothing to watch
                return
            for j, (value, since) in list(seen.items()):
                current = (beats or {}).get(j, value)
                seen[j] = (current, now) if current != value else (value, since)
            if now - reached > timeout_s:
                _report_lost(me, count, 0, now - reached)
            for j, (value, since) in seen.items():
                if now - since > timeout_s:
                    _report_lost(me, count, j, now - since)
            time.sleep(interval_s)

    thread = threading.Thread(target=watch, name="gradsim-watchdog", daemon=True)
    thread.start()
    return thread


def _read_peers(client, me: int) -> tuple:
    """One heartbeat of this process and a read of every process's heartbeat and exit word: ({process: counter},
    {process: "ok" | "error"}), (None, None) when the coordination service does not answer."""
    try:
        client.key_value_increment(f"gradsim/heartbeat/{me}", 1)
        beats = {int(k.rsplit("/", 1)[1]): v for k, v in client.key_value_dir_get("gradsim/heartbeat/")}
        exits = {int(k.rsplit("/", 1)[1]): v for k, v in client.key_value_dir_get("gradsim/exit/")}
        return beats, exits
    except Exception:  # the coordination service does not answer: process 0 died
        return None, None


def _say_how_this_process_ends(client, me: int) -> None:
    """At exit, write "gradsim/exit/<me>": "error" after an uncaught exception, else "ok" (not after `os._exit`:
    a process the watchdog ends, or one killed, says nothing)."""
    import atexit

    failed = {"error": False}
    previous = sys.excepthook

    def hook(kind, value, traceback):
        if isinstance(value, Exception):
            await_watchdog(value)  # a collective that failed because another process died: name that one
        failed["error"] = True
        previous(kind, value, traceback)

    def say():
        try:
            client.key_value_set(f"gradsim/exit/{me}", "error" if failed["error"] else "ok", allow_overwrite=True)
        except Exception:  # the coordination service is gone already
            pass

    sys.excepthook = hook
    atexit.register(say)  # after jax's own handler was registered, so it runs before jax shuts the client down


def await_watchdog(error: BaseException, timeout_s: float = WATCHDOG_TIMEOUT_S + 2 * WATCHDOG_INTERVAL_S) -> None:
    """After `error` in a collective of a multi-process job: when it is a runtime error (a failed collective, not a
    tracing error), wait up to `timeout_s` seconds for the watchdog to name a lost process (it then ends this
    process); return at once otherwise, or when it names none in time (the caller re-raises `error`).

    Args:
        error: the exception the collective raised.
        timeout_s: seconds to wait.
    """
    if jax.process_count() == 1 or not _collective_failure(error):
        return
    try:  # process 0's coordination service answers: wait for the heartbeats' verdict
        _client().key_value_increment(f"gradsim/heartbeat/{jax.process_index()}", 1)
    except Exception:  # it does not: process 0 died (jax itself aborts every process in a moment)
        _report_lost(jax.process_index(), jax.process_count(), 0, 0.0)
    _LOST["event"].wait(timeout_s)


def _collective_failure(error: BaseException) -> bool:
    """Whether `error` is the runtime's (a failed execution or collective: gloo's, NCCL's), not a Python one."""
    return isinstance(error, jax.errors.JaxRuntimeError) or any(
        word in str(error) for word in ("Gloo", "gloo", "NCCL", "collective", "UNAVAILABLE", "Connection reset"))


__all__ = ["BATCH_AXIS", "EXIT_PROCESS_LOST", "any_process", "await_watchdog", "barrier", "batch_mesh", "fetch",
           "initialize_distributed", "padded_size", "put_batch", "put_replicated", "watchdog"]
