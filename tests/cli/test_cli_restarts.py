"""`gradsim-jax fit --restarts N`: a start far off lands in a local minimum of the image loss; among N starts
the best finds the truth. The flags of restarts and of multi-host jobs are checked before anything runs.

The end-to-end case is `slow` (it compiles a render, a batched fit, a single fit and its report: about
two minutes on the shared 2-core machine); `tests/fit/test_fit_batched.py` covers the same ground cheaply
(a spring whose period has several minima, restarts finding the truth) without the renderer.
"""

import json
import re

import pytest

from gradsim_jax.cli import main

#: A square cloth pinned along its left edge, without gravity, thrown sideways: it stretches and springs
#: back, about two periods of sqrt(mass / stiffness) in the video. The image loss as a function of the
#: stiffness has its global minimum at the truth (20 N/m: basin about 10 to 30) and a local one at about
#: 7.7 N/m, where the oscillation is slower by about a period; the [initial] guess of 5 N/m rolls into it.
SCENE = """
[scene]
grid = [2, 2]
cell = [0.2, 0.2]
pos = [-0.2, -0.2, 0.0]
fix = ["left"]
velocity = [1.5, 0.0, 0.0]

[material]
mass = 0.01
tri_ke = 20.0
tri_ka = 20.0
tri_kd = 0.0
gravity = [0.0, 0.0, 0.0]

[camera]
distance = 1.5

[render]
width = 16
height = 16
color = [1.0, 1.0, 1.0]
coverage = "softras"

[simulation]
fps = 30.0
substeps = 8
frames = 16

[fit]
free = ["stiffness"]
loss = "rgba"
iterations = 40
learning_rate = 0.05
polish = 0

[initial]
tri_ke = 5.0
"""


@pytest.fixture
def scene(tmp_path):
    path = tmp_path / "spring_cloth.toml"
    path.write_text(SCENE)
    return path


@pytest.mark.parametrize("flags, message", [
    (["--restarts", "3", "--coordinator", "localhost:1234"], "give all of coordinator"),
    (["--restarts", "3", "--coordinator", "localhost", "--num-processes", "2", "--process-id", "0"], "host:port"),
    (["--restarts", "3", "--coordinator", "localhost:1234", "--num-processes", "2", "--process-id", "2"],
     r"process_id must be an integer in \[0, 2\)"),
    (["--restarts", "3", "--distributed", "--num-processes", "2"], "--distributed reads the job"),
    (["--coordinator", "localhost:1234", "--num-processes", "2", "--process-id", "0"], "--restarts N"),
])
def test_bad_restart_and_host_flags_fail_before_running(scene, tmp_path, capsys, flags, message):
    rc = main(["fit", str(scene), "--target", str(tmp_path / "none"), "--out", str(tmp_path / "out"), *flags])
    assert rc == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.parametrize("flags", [["--restarts", "0"], ["--restart-spread", "1"], ["--restart-spread", "nan"],
                                   ["--batch-mode", "pmap"], ["--num-processes", "0"]])
def test_bad_values_are_usage_errors(scene, flags):
    with pytest.raises(SystemExit) as e:
        main(["fit", str(scene), *flags])
    assert e.value.code == 2


@pytest.mark.slow
def test_restarts_find_the_truth_where_a_single_start_stops_in_a_local_minimum(scene, tmp_path, capsys):
    target = tmp_path / "target"
    assert main(["render", str(scene), "--out", str(target)]) == 0
    out = tmp_path / "fit"
    rc = main(["fit", str(scene), "--target", str(target), "--true", "--out", str(out), "--no-progress",
               "--restarts", "8", "--restart-spread", "6", "--seed", "0"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "<- best" in printed and "final losses from" in printed
    report = json.loads((out / "report.json").read_text())
    restarts = report["restarts"]
    assert restarts["restarts"] == 8 and restarts["spread_factor"] == 6.0 and restarts["seed"] == 0
    members, best = restarts["members"], restarts["best"]
    # Member 0 is the single start from [initial]: it stops in the local minimum near 7.7 N/m.
    assert members[0]["start"]["stiffness"] == pytest.approx(5.0)
    assert 6.0 < members[0]["estimated"]["stiffness"] < 9.0
    assert members[0]["final_loss"] > 30 * members[best]["final_loss"]
    # The best start, fitted again through the whole pipeline, recovers the truth.
    assert best != 0 and report["initial"]["stiffness"] == pytest.approx(members[best]["start"]["stiffness"])
    assert report["relative_error"]["stiffness"] < 0.01
    # The refit runs other compiled programs from the same start (a single fit, not a batch member), so the two
    # agree to what both fits resolve (about 1 % of the truth here), not to one machine's rounding.
    assert report["estimated"]["stiffness"] == pytest.approx(members[best]["estimated"]["stiffness"], rel=2e-2)
    spread = restarts["spread"]["stiffness"]
    assert spread["min"] < 9.0 and spread["max"] > 19.0
