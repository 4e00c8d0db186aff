"""Windowed fits survive preemption: SIGTERM (under `preemptible`) during the Adam stage writes the checkpoint of
the next iteration boundary and raises `Preempted`; during the Levenberg-Marquardt polish it stops at the next
step (the Adam checkpoint is complete); kill -9 loses only the iterations since the last checkpoint. Resuming
ends with the bits of an uninterrupted fit: estimates, loss history and polish records.

The signal is real (`os.kill` of this process from the fit's callback, at a chosen iteration) and the kill -9 a
real subprocess; the fit is a tiny demo cloth (tests/sysid/test_sysid_windowed.py), 8 frames at 12 px.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from gradsim_jax.fit.checkpoint import Preempted, checkpoint_path, preemptible
from gradsim_jax.sysid.windows.windowed import fit_windowed

from test_sysid_windowed import FREE, tiny_cloth

ITERATIONS = 8
OPTIONS = dict(window=4, shooting="truncated", iterations=ITERATIONS, learning_rate=0.05, polish=3, progress=False,
               checkpoint_every=2)
START = {"mass": 1.4, "stiffness": 240.0}


@pytest.fixture(scope="module")
def tiny():
    return tiny_cloth(frames=8, size=12)


@pytest.fixture(scope="module")
def reference(tiny, tmp_path_factory):
    exp, target = tiny
    return fit_windowed(exp, target, START, FREE, checkpoint_dir=str(tmp_path_factory.mktemp("ref")), **OPTIONS)


def assert_same(a, b):
    """Bit for bit: estimates, the Adam history and the polish's records."""
    assert a.theta.keys() == b.theta.keys()
    for name in a.theta:
        assert np.array_equal(a.theta[name], b.theta[name]), name
    assert a.history["loss"] == b.history["loss"] and a.history["iteration"] == b.history["iteration"]
    assert a.history["params"] == b.history["params"]
    assert a.history["polish"] == b.history["polish"]
    assert a.loss == b.loss


def sigterm_at(iteration):
    """A fit callback that sends this process SIGTERM after `iteration`."""
    def callback(it, theta, loss):
        if it == iteration:
            os.kill(os.getpid(), signal.SIGTERM)
    return callback


@pytest.mark.parametrize("at, stage", [(4, "adam"), (ITERATIONS - 1, "polish")])
def test_sigterm_then_resume_is_bit_identical(tiny, reference, tmp_path, at, stage):
    exp, target = tiny
    with preemptible(), pytest.raises(Preempted) as stopped:
        fit_windowed(exp, target, START, FREE, checkpoint_dir=str(tmp_path), callback=sigterm_at(at), **OPTIONS)
    if stage == "adam":  # the boundary after iteration `at`: its checkpoint, not the periodic one before it
        assert stopped.value.path == checkpoint_path(str(tmp_path)) and stopped.value.iteration == at + 1
        assert f"fit stopped by signal SIGTERM at iteration {at + 1}" in str(stopped.value)
    else:  # Adam had finished (its checkpoint holds every iteration); the polish stops before its first step
        assert stopped.value.path is None and "Levenberg-Marquardt polish" in str(stopped.value)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler is gone after the block
    resumed = fit_windowed(exp, target, START, FREE, checkpoint_dir=str(tmp_path), resume=True, **OPTIONS)
    assert resumed.fit.resume["from_iteration"] == (at + 1 if stage == "adam" else ITERATIONS)
    assert_same(reference, resumed)


SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[3])
    import numpy as np
    from gradsim_jax.sysid.windows.windowed import fit_windowed
    from test_sysid_windowed import FREE, tiny_cloth
    exp, target = tiny_cloth(frames=8, size=12)
    options = dict(window=4, shooting="truncated", iterations=%(iterations)d, learning_rate=0.05, polish=3,
                   progress=False, checkpoint_every=2)
    r = fit_windowed(exp, target, {"mass": 1.4, "stiffness": 240.0}, FREE, checkpoint_dir=sys.argv[1],
                     resume=sys.argv[2] == "resume", callback=lambda it, th, loss: time.sleep(0.3), **options)
    np.savez(sys.argv[1] + "/result.npz", **{k: np.asarray(v) for k, v in r.theta.items()},
             loss=np.asarray(r.history["loss"]), polish=np.asarray(r.history["polish"]["loss"]))
    print("resumed from", r.fit.resume["from_iteration"] if r.fit.resume else None, flush=True)
    """
) % {"iterations": ITERATIONS}


def test_kill_9_then_resume_continues_from_the_last_checkpoint(reference, tmp_path):
    cache = Path(__file__).resolve().parents[2] / ".pytest_cache" / "jax-compilation"
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache))

    def run(what):
        return subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path), what, str(Path(__file__).parent)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    proc = run("run")
    file = Path(checkpoint_path(str(tmp_path)))
    begun = time.monotonic()
    while not file.exists():  # the first checkpoint (iteration 2); each iteration then lasts >= 0.3 s
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() - begun < 240, "no checkpoint appeared"
        time.sleep(0.005)
    proc.kill()
    proc.communicate()
    with np.load(file) as z:
        stopped_at = int(json.loads(str(z["meta"][()]))["iteration"])
    assert 0 < stopped_at < ITERATIONS
    proc = run("resume")
    log = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0 and f"resumed from {stopped_at}" in log, log
    with np.load(tmp_path / "result.npz") as z:
        for name, value in reference.theta.items():
            assert np.array_equal(z[name], value), name
        assert z["loss"].tolist() == reference.history["loss"]
        assert z["polish"].tolist() == reference.history["polish"]["loss"]
