"""SIGKILL a real `gradsim-jax fit` at random moments, KILLS times in a chain (each resumed run may be killed
again), some kills timed to land while a checkpoint or an output file is being written; the last resumed
run ends with exactly the parameters, optimizer state, history and report of an uninterrupted run.

Cost: every run is a fresh interpreter on a 2 x 2 cloth at 16 px; they share one persistent compilation
cache, so only the first compiles.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from gradsim_jax.cli import main

from cli_scenes import SMALL_CLOTH, small_run

ITERATIONS = 20
KILLS = 2
SCENE = SMALL_CLOTH + f"""
[material]
mass = {{mass}}
""" + small_run(3) + f"""iterations = {ITERATIONS}
polish = 0
"""


def _environment(tmp_path):
    cache = jax.config.jax_compilation_cache_dir or str(tmp_path / "jax-cache")
    return dict(os.environ, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=cache,
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")


def _temporaries(folder) -> set:
    """Hidden temporary files of atomic writes in `folder` (checkpoint, report, plots, videos)."""
    try:
        return {n for n in os.listdir(folder) if n.startswith(".") and ".tmp" in n}
    except FileNotFoundError:
        return set()


def _inode(path):
    try:
        st = os.stat(path)
        return st.st_ino, st.st_mtime_ns
    except FileNotFoundError:
        return None


def _checkpoint_iteration(path) -> int:
    if not os.path.exists(path):
        return 0
    with np.load(path) as z:
        return int(json.loads(str(z["meta"][()]))["iteration"])


def _arrays(path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


class _Moment:
    """When to kill a run: `reached()` is polled every `poll` seconds while it runs.

    delay: a random time after the start (imports, compilation, the first iterations); write: the
    count-th checkpoint write seen in progress (its temporary file exists); iteration: a few ms after the
    count-th checkpoint of the run; output: an output file (video, plot, report) being written.
    """

    def __init__(self, mode, rng, out):
        self.mode, self.out, self.folder = mode, out, out / "checkpoint"
        self.delay, self.count, self.jitter = rng.uniform(0.1, 2.5), rng.randint(1, 3), rng.uniform(0.0, 0.003)
        self.stale = _temporaries(self.folder) | _temporaries(out)
        self.last, self.seen, self.noticed = _inode(self.folder / "checkpoint.npz"), 0, set()
        self.start = time.perf_counter()
        # A checkpoint write takes about a millisecond: catching one in progress needs a fast poll.
        self.poll = 0.0002 if mode == "write" else 0.001

    def new_temporaries(self, folder):
        return _temporaries(folder) - self.stale

    def reached(self) -> bool:
        if self.mode == "delay":
            return time.perf_counter() - self.start >= self.delay
        if self.mode == "write":
            self.noticed |= self.new_temporaries(self.folder)
            return len(self.noticed) >= self.count
        if self.mode == "iteration":
            now = _inode(self.folder / "checkpoint.npz")
            if now != self.last:
                self.last, self.seen = now, self.seen + 1
            if self.seen >= self.count:
                time.sleep(self.jitter)
                return True
            return False
        return bool(self.new_temporaries(self.out))


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end run; `make test-all` runs it
def test_sigkill_at_random_moments_then_resume_is_bit_identical(tmp_path):
    started = time.perf_counter()
    (tmp_path / "truth.toml").write_text(SCENE.format(mass=0.012))
    scene = tmp_path / "scene.toml"
    scene.write_text(SCENE.format(mass=0.01))
    assert main(["render", str(tmp_path / "truth.toml"), "--out", str(tmp_path / "target.gif")]) == 0
    env, logfile = _environment(tmp_path), tmp_path / "log.txt"

    def run(out, resume=False, moment=None):
        """Run a fit to its end, or until `moment` and SIGKILL it; True when it was killed."""
        command = [sys.executable, "-m", "gradsim_jax.cli", "fit", str(scene), "--target", str(tmp_path / "target.gif"),
                   "--out", str(out), "--checkpoint-every", "1", "--no-progress"] + (["--resume"] if resume else [])
        with open(logfile, "a") as log:
            proc = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=log, stderr=log)
            try:
                while moment is not None and proc.poll() is None and not moment.reached():
                    assert time.perf_counter() - moment.start < 120, "a fit hung"
                    time.sleep(moment.poll)
                if proc.poll() is None and moment is not None:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return True
                assert proc.wait(timeout=300) == 0, logfile.read_text()
                return False
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

    reference = tmp_path / "reference"
    run(reference)

    out = tmp_path / "killed"
    ckpt = out / "checkpoint" / "checkpoint.npz"
    rng = random.Random(8)
    plan = ["write", "iteration"]  # one of them (chosen by the seed), then the outputs: KILLS = 2 kills
    rng.shuffle(plan)
    plan = plan[:KILLS - 1] + ["output", "delay"]  # the iterations are done by then: kill while writing outputs
    kills = []
    for _ in range(3 * KILLS):
        if len(kills) == KILLS:
            break
        mode = plan[len(kills)]
        if mode in ("write", "iteration") and _checkpoint_iteration(ckpt) == ITERATIONS:
            mode = "delay"
        moment = _Moment(mode, rng, out)
        if run(out, resume=ckpt.exists(), moment=moment):
            left = moment.new_temporaries(out / "checkpoint") | moment.new_temporaries(out)
            kills.append((mode, round(time.perf_counter() - moment.start, 3), _checkpoint_iteration(ckpt),
                          sorted(left)))
    assert len(kills) == KILLS, kills
    run(out, resume=ckpt.exists())

    # Bit for bit: parameters, optimizer state, history, and every number of the report.
    a, b = _arrays(reference / "checkpoint" / "checkpoint.npz"), _arrays(ckpt)
    assert sorted(a) == sorted(b)
    for name in a:
        if name != "meta":
            assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name
    assert json.loads(str(a["meta"][()])) == json.loads(str(b["meta"][()]))
    assert a["hist_iteration"].tolist() == list(range(ITERATIONS))
    ra, rb = (json.loads((d / "report.json").read_text()) for d in (reference, out))
    for key in ("estimated", "initial", "final_loss", "iterations", "inputs", "convergence", "identifiability"):
        assert ra[key] == rb[key], key
    assert ra["resume"] is None and rb["resume"]["differences"] == {}

    during_writes = [k for k in kills if any(".checkpoint.npz." in name for name in k[3])]
    print(f"\n{KILLS} kills in {time.perf_counter() - started:.1f} s; {len(during_writes)} interrupted a checkpoint "
          f"write; (mode, seconds after start, checkpoint iteration, temporaries left):")
    for kill in kills:
        print("  ", kill)
