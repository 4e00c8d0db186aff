"""`gradsim-jax fit --restarts N` survives preemption: SIGTERM makes the run write its checkpoint at the next
iteration boundary (of the batched restarts' stage, or of the refit of the best start when it came later) and
exit with status 143; `--resume` then ends with the report of an uninterrupted run, number for number.

The reference runs in this process; the stopped run is a subprocess (a real SIGTERM), polled for its first
checkpoint rather than waited on for a fixed time. A 2 x 2 cloth at 16 px, 3 frames, 40 Adam iterations.

Marked slow (suite time: three end-to-end runs with their videos and report, about 50 s on the shared 2-core
machine; `make test-all` runs it): the batched stage's checkpoints and resume are in the default suite through
`fit_batched` itself (tests/fit/test_fit_preemption.py).
"""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from gradsim_jax.cli import main

from cli_scenes import SMALL_CLOTH, small_run

SCENE = SMALL_CLOTH + """
[material]
mass = {mass}
""" + small_run(3) + """iterations = 40
polish = 0
"""


def _flags(tmp_path, out):
    return ["fit", str(tmp_path / "scene.toml"), "--target", str(tmp_path / "target.gif"), "--out", str(out),
            "--restarts", "2", "--checkpoint-every", "2", "--no-progress"]


def _iteration(path) -> int:
    try:
        with np.load(path) as z:
            return int(json.loads(str(z["meta"][()]))["iteration"])
    except (OSError, ValueError, KeyError):
        return -1


@pytest.mark.slow
def test_sigterm_then_resume_gives_the_uninterrupted_report(tmp_path):
    (tmp_path / "truth.toml").write_text(SCENE.format(mass=0.012))
    (tmp_path / "scene.toml").write_text(SCENE.format(mass=0.01))
    assert main(["render", str(tmp_path / "truth.toml"), "--out", str(tmp_path / "target.gif")]) == 0
    reference = tmp_path / "reference"
    assert main(_flags(tmp_path, reference)) == 0

    out = tmp_path / "stopped"
    cache = jax.config.jax_compilation_cache_dir or str(tmp_path / "jax-cache")
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=cache)
    proc = subprocess.Popen([sys.executable, "-m", "gradsim_jax.cli", *_flags(tmp_path, out)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = out / "checkpoint" / "restarts" / "checkpoint.npz"
    begun = time.monotonic()
    while _iteration(first) < 2:
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() - begun < 240, "no checkpoint appeared"
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    log = proc.communicate(timeout=240)[0]
    assert proc.returncode == 143, log
    assert "stopped by signal SIGTERM at iteration" in log and "Traceback" not in log
    assert not (out / "report.json").exists()
    print("\n" + log.strip().splitlines()[-1])

    assert main(_flags(tmp_path, out) + ["--resume"]) == 0
    a, b = (json.loads((d / "report.json").read_text()) for d in (reference, out))
    for key in ("estimated", "initial", "final_loss", "iterations", "inputs", "convergence"):
        assert a[key] == b[key], key
    ra, rb = a["restarts"], b["restarts"]
    for key in ("members", "best", "spread", "final_loss_spread", "iterations"):
        assert ra[key] == rb[key], key
