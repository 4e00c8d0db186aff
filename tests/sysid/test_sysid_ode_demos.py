"""The ODE bodies' demos on a reduced size (issue 37): the pendulum's length and damping recovered from its
video, `demo double-pendulum` from its own start (l2 = 1.7) writing every output, and a scene file's
[pendulum] and [[ball]] tables built into the same bodies the Python builders make."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.cli import main
from gradsim_jax.scenefile import SceneFileError, load_scene
from gradsim_jax.scenes.ode import simple_pendulum

OUTPUTS = ("target.gif", "initial.gif", "fitted.gif", "comparison.mp4", "loss.png", "params.png", "report.json")


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_pendulum_length_and_damping_are_recovered_from_video():
    exp = simple_pendulum(size=20, frames=20)
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    initial = {**truth, "pendulum_length": jnp.asarray([[1.3]], jnp.float32),
               "pendulum_damping": jnp.asarray([[0.08]], jnp.float32)}
    config = sysid.FitConfig(free=("pendulum_length", "pendulum_damping"), iterations=8, learning_rate=0.05,
                             loss="rgba", polish=6, progress=False)
    result = sysid.identify(exp, target, initial, config)
    # The target is this renderer's own video: the fit ends at float32's noise (the loss ~1e-12 at 64 px);
    # 1e-3 leaves room for the 20 px frames' coarser edges.
    assert abs(float(result.theta["pendulum_length"][0, 0]) - 1.0) < 1e-3
    assert abs(float(result.theta["pendulum_damping"][0, 0]) / 0.05 - 1.0) < 1e-2
    assert result.history["loss"][-1] < 1e-3 * result.history["loss"][0]


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores): an end-to-end run; `make test-all` runs it
def test_demo_double_pendulum_starts_from_its_own_guess_and_writes_every_output(tmp_path):
    out = tmp_path / "double"
    assert main(["demo", "double-pendulum", "--size", "16", "--frames", "4", "--iterations", "1", "--polish", "0",
                 "--no-progress", "--out", str(out)]) == 0
    for name in OUTPUTS:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    report = json.loads((out / "report.json").read_text())
    np.testing.assert_allclose(np.asarray(report["initial"]["pendulum_length"]).reshape(-1), [1.0, 1.7], rtol=1e-6)
    # gradSim's energy check: no damping here, so the motion's drift is its conservative twin's, Tsit5's alone.
    energy = report["energy"]
    assert energy["unit"] == "J" and energy["within_edrift"] and energy["max_drift"] == energy["conservative_max_drift"]
    assert main(["demo", "bounce", "--estimate", "pendulum_length", "--out", str(tmp_path / "b")]) == 2


SCENE = """
[pendulum]
lengths = [0.5, 0.4]
theta = [0.6, -0.3]
masses = [1.0, 0.5]
pivot = [0.0, 1.0, 0.0]
color = [0.1, 0.8, 0.1]

[camera]
distance = 3.0
elevation = 0.0

[render]
width = 16
height = 16

[simulation]
fps = 30.0
frames = 3
substeps = 4

[fit]
free = ["pendulum_length"]
"""


def test_scene_file_pendulum_and_balls(tmp_path):
    path = tmp_path / "scene.toml"
    path.write_text(SCENE)
    exp = load_scene(path).experiment()
    np.testing.assert_allclose(exp.params.ode.length, [[0.5, 0.4]])
    np.testing.assert_allclose(exp.state0.ode.theta, [[0.6, -0.3]], rtol=1e-6)
    np.testing.assert_allclose(exp.theta["pendulum_length"], [[0.5, 0.4]])
    # [initial] takes one guess per link (or one for all)
    from gradsim_jax.scenefile.quantities import initial_theta

    path.write_text(SCENE + "\n[initial]\npendulum_length = [0.55, 0.35]\n")
    spec = load_scene(path)
    np.testing.assert_allclose(initial_theta(spec, spec.experiment())["pendulum_length"], [[0.55, 0.35]])
    path.write_text(SCENE + "\n[initial]\npendulum_length = [0.55, 0.35, 0.2]\n")
    try:
        load_scene(path).experiment()
        spec = load_scene(path)
        initial_theta(spec, spec.experiment())
        raise AssertionError("three lengths for two links were accepted")
    except SceneFileError as e:
        assert "one per link (2), got 3" in str(e)
    path.write_text(SCENE)
    per_bob = len(exp.topology.ode.system.bob_faces)
    bobs = np.asarray(exp.colors.rgb)[:2 * per_bob]
    np.testing.assert_allclose(bobs, np.broadcast_to([0.1, 0.8, 0.1], bobs.shape), atol=1e-6)
    _, video = sysid.simulate_video(exp, exp.theta)
    assert video.shape == (4, 16, 16, 4) and float(video[..., 3].max()) > 0.5  # the bobs are in the picture
    path.write_text(SCENE.replace("[pendulum]\nlengths = [0.5, 0.4]\n", "[pendulum]\nlengths = [0.5, -0.4]\n"))
    try:
        load_scene(path).experiment()
        raise AssertionError("a negative length was accepted")
    except SceneFileError as e:
        assert "Params.ode.length[0, 1] = -0.4" in str(e)
    balls = SCENE.split("[camera]")[1].replace('free = ["pendulum_length"]', 'free = ["ball_restitution"]')
    path.write_text("[[ball]]\npos = [0.0, 1.0, 0.0]\nvelocity = [1.0, 0.0, 0.0]\nradius = 0.2\n"
                    "restitution = 0.6\n\n[camera]" + balls)
    exp = load_scene(path).experiment()
    assert float(exp.theta["ball_restitution"]) == np.float32(0.6)
    np.testing.assert_allclose(exp.state0.ode.v, [[1.0, 0.0, 0.0]])
