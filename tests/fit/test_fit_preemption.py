"""Batched fits survive preemption: SIGTERM writes a checkpoint at the next iteration boundary and exits with
143, kill -9 loses only the iterations since the last checkpoint, and `resume=True` ends with the bits of an
uninterrupted run; the same for a two-process job (`jax.distributed` on localhost, one CPU device each), where a
process killed with -9 makes the other stop with a message naming it instead of hanging in a collective.

Each run is a fresh interpreter (signals, kill -9, `jax.distributed`) fitting 6 members of a small analytic loss
with a PRNG key (`lax.map` over members); a `jax.debug.callback` sleeps a few milliseconds per member and
iteration so that a run lasts long enough to be stopped in the middle, whatever the machine's load (it changes no
number). (The physics inside a batched fit is `test_fit_sharding.py`'s: checkpoints do not depend on the loss.)
The parent polls the checkpoint file instead of sleeping fixed times.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

STEPS = 40
EVERY = 2

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    out, what = sys.argv[1], sys.argv[2]
    from gradsim_jax import parallel
    from gradsim_jax.fit.checkpoint import EXIT_PREEMPTED, Preempted, preemptible
    handler = preemptible()  # kept: the block ends when the object goes
    handler.__enter__()  # before jax.distributed starts, which takes SIGTERM over: initialize_distributed gives it
    # back (the command line joins the job first)
    if len(sys.argv) > 3:  # coordinator, number of processes, this process, watchdog seconds
        parallel.initialize_distributed(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                                        watchdog_s=float(sys.argv[6]))
    import jax, jax.numpy as jnp
    from gradsim_jax.fit.batched import fit_batched

    def wavy(p, key):
        jax.debug.callback(lambda: time.sleep(0.004))  # slow enough to be stopped midway; no number changes
        return (jnp.sum((jnp.sin(3.0 * p["a"]) - 0.5) ** 2) + (p["ke"] - p["target"]) ** 2
                + 1e-3 * jax.random.normal(key))

    mesh = parallel.batch_mesh() if jax.process_count() > 1 else None
    try:
        r = fit_batched(wavy, {"a": jnp.zeros(2), "ke": jnp.float32(1.0), "target": jnp.float32(2.0)},
                        batch={"ke": jnp.geomspace(0.5, 4.0, 6).astype(jnp.float32),
                               "a": jnp.linspace(-1, 1, 12).reshape(6, 2)}, free=("a", "ke"),
                        transforms={"ke": "log"}, steps=%(steps)d, learning_rate=0.1, mode="map", mesh=mesh,
                        progress=False, uses_key=True, key=jax.random.key(3), checkpoint_dir=out + "/ckpt",
                        checkpoint_every=%(every)d, resume=what == "resume", metadata={"case": "spring"})
    except Preempted as e:
        print(e, flush=True)
        sys.exit(EXIT_PREEMPTED)
    if jax.process_index() == 0:
        np.savez(out + "/result.npz", loss=r.loss, history=r.history["loss"], grad=r.history["grad_norm"],
                 ke=r.history["params"]["ke"], a=r.history["params"]["a"], final=r.history["final"]["ke"],
                 final_a=r.history["final"]["a"])
    print("resumed from", None if r.resume is None else r.resume["from_iteration"], flush=True)
    """
) % {"steps": STEPS, "every": EVERY}

#: The persistent compilation cache of the test suite (tests/conftest.py), for the subprocesses too.
CACHE = Path(__file__).resolve().parents[2] / ".pytest_cache" / "jax-compilation"


def start(out, what, *distributed):
    """Start the script on folder `out` ("run" or "resume"), as one process of a distributed job when given."""
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(CACHE))
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(out), what, *map(str, distributed)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=240):
    """(exit status, stdout + stderr) of `proc`, killed if it hangs."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"a run hung:\n{out}\n{err}")
    return proc.returncode, out + err


def checkpoint_iteration(out) -> int:
    """The iteration of the checkpoint in `out`, -1 while there is none (or while it is being replaced)."""
    try:
        with np.load(Path(out) / "ckpt" / "checkpoint.npz") as z:
            return int(json.loads(str(z["meta"][()]))["iteration"])
    except (OSError, ValueError, KeyError):
        return -1


def wait_for_checkpoint(out, procs, least=2 * EVERY, timeout=240):
    """Poll until the checkpoint in `out` holds iteration >= `least` (failing when a process ends first)."""
    begun = time.monotonic()
    while checkpoint_iteration(out) < least:
        for p in procs:
            assert p.poll() is None, finish(p)[1]
        assert time.monotonic() - begun < timeout, "no checkpoint appeared"
        time.sleep(0.005)


def same_result(a, b):
    with np.load(Path(a) / "result.npz") as x, np.load(Path(b) / "result.npz") as y:
        assert sorted(x.files) == sorted(y.files)
        for name in x.files:
            assert x[name].dtype == y[name].dtype and np.array_equal(x[name], y[name], equal_nan=True), name


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted single-process run."""
    out = tmp_path_factory.mktemp("reference")
    rc, log = finish(start(out, "run"))
    assert rc == 0, log
    return out


def test_batched_fit_stopped_by_sigterm_then_killed_resumes_bit_for_bit(reference, tmp_path):
    # SIGTERM: the checkpoint of the next boundary, a message, status 143.
    proc = start(tmp_path, "run")
    wait_for_checkpoint(tmp_path, [proc])
    proc.send_signal(signal.SIGTERM)
    rc, log = finish(proc)
    first_stop = checkpoint_iteration(tmp_path)
    assert rc == 143 and 0 < first_stop < STEPS, log
    assert f"batched fit stopped by signal SIGTERM at iteration {first_stop}" in log and "Traceback" not in log

    # Resumed, then kill -9 after a later checkpoint: the next resume starts from that one.
    proc = start(tmp_path, "resume")
    wait_for_checkpoint(tmp_path, [proc], least=first_stop + EVERY)
    proc.kill()
    rc, log = finish(proc)
    second_stop = checkpoint_iteration(tmp_path)
    assert rc == -signal.SIGKILL and first_stop < second_stop < STEPS, log
    rc, log = finish(start(tmp_path, "resume"))
    assert rc == 0 and f"resumed from {second_stop}" in log, log
    same_result(reference, tmp_path)


def test_two_process_job_stopped_by_sigterm_resumes_and_a_killed_process_stops_the_other(reference, tmp_path):
    def job(what, watchdog=5.0):
        port = free_port()
        return [start(tmp_path, what, f"localhost:{port}", 2, i, watchdog) for i in range(2)]

    # SIGTERM to both processes (what a scheduler does): they agree on one boundary, process 0 writes, both exit 143.
    procs = job("run")
    wait_for_checkpoint(tmp_path, procs)
    for p in procs:
        p.send_signal(signal.SIGTERM)
    results = [finish(p) for p in procs]
    assert [rc for rc, _ in results] == [143, 143], results
    first_stop = checkpoint_iteration(tmp_path)
    assert 0 < first_stop < STEPS

    # Resumed, then process 1 killed with -9 after a later checkpoint: process 0 names it and stops.
    procs = job("resume")
    wait_for_checkpoint(tmp_path, procs, least=first_stop + EVERY)
    procs[1].kill()
    killed = time.monotonic()
    rc, log = finish(procs[0], timeout=120)
    print(f"\nthe survivor stopped {time.monotonic() - killed:.1f} s after process 1 was killed (watchdog 5 s)")
    finish(procs[1])
    assert rc == 75, log
    assert "process 1 of the 2-process job stopped responding" in log
    second_stop = checkpoint_iteration(tmp_path)
    assert first_stop < second_stop < STEPS

    # Resumed again to the end: the bits of the uninterrupted single-process run.
    results = [finish(p) for p in job("resume")]
    assert [rc for rc, _ in results] == [0, 0], results
    assert f"resumed from {second_stop}" in results[0][1]
    same_result(reference, tmp_path)


def test_checkpoint_arrays_and_members_round_trip_bit_for_bit(tmp_path):
    from gradsim_jax.fit.checkpoint import FitState, load_checkpoint, save_checkpoint

    state = FitState(u={"a": np.arange(6, dtype=np.float32).reshape(3, 2)}, opt_state=(np.zeros(3, np.float32),),
                     key=None, iteration=np.int32(5))
    arrays = {"frozen": np.array([True, False, True]), 'out:["loss"]': np.float32([[np.nan, 1e-30, -0.0]])}
    path = save_checkpoint(str(tmp_path / "c.npz"), state, None, {"x": 1}, arrays=arrays, members=3)
    loaded = load_checkpoint(path, like=state)
    assert loaded.members == 3 and int(loaded.state.iteration) == 5 and sorted(loaded.arrays) == sorted(arrays)
    for name, value in arrays.items():
        assert loaded.arrays[name].dtype == value.dtype
        assert loaded.arrays[name].tobytes() == value.tobytes(), name
    single = load_checkpoint(save_checkpoint(str(tmp_path / "d.npz"), state), like=state)
    assert single.arrays == {} and single.members is None


def test_a_single_fit_stops_at_the_boundary_after_sigterm_and_resumes_bit_for_bit(tmp_path):
    import jax.numpy as jnp

    from gradsim_jax.fit import Preempted, fit, preemptible

    def loss(p):
        return jnp.sum((jnp.sin(3.0 * p["a"]) - 0.5) ** 2)

    kw = dict(steps=12, learning_rate=0.1, progress=False, checkpoint_dir=str(tmp_path), checkpoint_every=5)
    reference = fit(loss, {"a": jnp.float32([0.1, -0.4])}, **dict(kw, checkpoint_dir=str(tmp_path / "ref")))

    def callback(it, params, value, aux):
        if it == 6:
            os.kill(os.getpid(), signal.SIGTERM)

    with preemptible(), pytest.raises(Preempted) as stopped:
        fit(loss, {"a": jnp.float32([0.1, -0.4])}, callback=callback, **kw)
    assert stopped.value.iteration == 7 and checkpoint_iteration_of(tmp_path / "checkpoint.npz") == 7
    resumed = fit(loss, {"a": jnp.float32([0.1, -0.4])}, resume=True, **kw)
    assert resumed.resume["from_iteration"] == 7
    assert resumed.history["loss"] == reference.history["loss"] and resumed.loss == reference.loss
    assert np.array_equal(resumed.params["a"], reference.params["a"])


def checkpoint_iteration_of(path) -> int:
    with np.load(path) as z:
        return int(json.loads(str(z["meta"][()]))["iteration"])
