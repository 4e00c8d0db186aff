"""Batched fits split over devices (a `Mesh` over the batch axis) and over processes (`jax.distributed`) give
the single-device result.

The CPU is split into several devices with XLA_FLAGS=--xla_force_host_platform_device_count, which must be
set before jax starts: each case runs in a fresh Python process. The batch (6 members) does not divide
the 4 devices, so padding is exercised too. The losses are a small analytic one (vmap) and a mass on a
spring simulated by `gs.simulate` (lax.map), so the physics' scans run inside `shard_map`.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    from gradsim_jax import parallel
    which = sys.argv[1].split(",")  # "wavy sharded", "spring single", ...
    if len(sys.argv) > 2:  # coordinator, number of processes, this process
        parallel.initialize_distributed(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    import gradsim_jax as gs
    from gradsim_jax.fit.batched import fit_batched
    from gradsim_jax.physics import replace_paths

    def wavy(p):
        return jnp.sum((jnp.sin(3.0 * p["a"]) - 0.5) ** 2) + (p["b"] - p["t"]) ** 2

    scene = gs.particles([[0, 0, 0], [0.5, 0, 0]], v=[[0, 0, 0], [1.0, 0, 0]], mass=[0.0, 1.0])
    topology, params, state0 = scene.add_springs([[0, 1]], ke=100.0).build(gravity=(0.0, 0.0, 0.0))

    def spring(p):
        q = replace_paths(params, {"springs.ke": jnp.reshape(p["ke"], (1,))})
        x = gs.simulate(topology, q, state0, frames=8, substeps=2, frame_dt=1 / 30).particles.x[:, 1, 0]
        return jnp.mean((x - p["target"]) ** 2)

    target = np.linspace(0.5, 0.6, 9).astype(np.float32)
    cases = {
        "wavy": (wavy, {"a": jnp.zeros(2), "b": jnp.float32(1.0), "t": jnp.float32(0.0)},
                 {"a": jnp.linspace(-1, 1, 12).reshape(6, 2), "t": jnp.arange(6.0)}, "vmap"),
        "spring": (spring, {"ke": jnp.float32(100.0), "target": jnp.asarray(target)},
                   {"ke": jnp.geomspace(20.0, 400.0, 6).astype(jnp.float32)}, "map"),
    }
    mesh = parallel.batch_mesh()
    out = {"devices": jax.device_count(), "processes": jax.process_count()}
    for name, (loss, p, batch, mode) in cases.items():
        free = ("a", "b") if name == "wavy" else ("ke",)
        kw = dict(batch=batch, free=free, transforms={"ke": "log"} if name == "spring" else None, steps=4,
                  learning_rate=0.1, mode=mode, progress=False)
        for label, m in (("sharded", mesh), ("single", None)):
            if f"{name} {label}" not in which:
                continue
            r = fit_batched(loss, p, mesh=m, **kw)
            out[f"{name} {label}"] = {"loss": r.loss.tolist(), "devices": r.devices,
                                      "final": {n: np.asarray(v).tolist() for n, v in r.history["final"].items()},
                                      "history": np.nan_to_num(r.history["loss"]).tolist()}
    print("RESULT " + json.dumps(out))
    """
)


#: The persistent compilation cache of the test suite (tests/conftest.py), for the subprocesses too.
CACHE = Path(__file__).resolve().parents[2] / ".pytest_cache" / "jax-compilation"


def run_script(args, devices):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=str(CACHE), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.2",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    return subprocess.Popen([sys.executable, "-c", SCRIPT, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def result_of(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def assert_same(result, reference, devices, names=("wavy", "spring")):
    for name in names:
        sharded, single = result[f"{name} sharded"], reference[f"{name} single"]
        assert sharded["devices"] == devices and single["devices"] == 1
        assert len(sharded["loss"]) == 6  # the padding members are dropped
        np.testing.assert_allclose(sharded["loss"], single["loss"], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(sharded["history"], single["history"], rtol=1e-6, atol=1e-9)
        for n in single["final"]:
            np.testing.assert_allclose(sharded["final"][n], single["final"][n], rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def four_devices():
    """Both cases, sharded over 4 devices and on one device, in one process."""
    return result_of(run_script(["wavy sharded,wavy single,spring sharded,spring single"], devices=4))


def test_sharded_over_four_cpu_devices_equals_one_device(four_devices):
    assert four_devices["devices"] == 4 and four_devices["processes"] == 1
    assert_same(four_devices, four_devices, 4)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_with_jax_distributed_equal_one(four_devices):
    """Two processes on localhost, two CPU devices each: the spring fits over a mesh of 4 devices in two
    processes; both get the whole result (gathered over gloo), equal to the single-device one."""
    address = f"127.0.0.1:{free_port()}"
    procs = [run_script(["spring sharded", address, "2", str(i)], devices=2) for i in range(2)]
    try:
        results = [result_of(p) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r in results:
        assert r["devices"] == 4 and r["processes"] == 2
        assert_same(r, four_devices, 4, names=("spring",))
    assert results[0]["spring sharded"] == results[1]["spring sharded"]
