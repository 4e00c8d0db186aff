"""Render capacities a scene file leaves out (`scenefile.capacities`): every face is kept (exact), and `gradsim-jax
fit` prints one hint line for a scene of more than 256 faces rendered so; none for a small scene or one whose
file sets smaller capacities."""

from gradsim_jax.cli import main
from gradsim_jax.scenefile import load_scene
from gradsim_jax.scenefile.capacities import HINT_FACES, capacity_hint

from cli_scenes import write_scene

#: A cloth of cells x cells cells released from horizontal on its left edge, filmed at 24 x 24 px.
SWING = """
[scene]
grid = [{cells}, {cells}]
cell = [0.05, 0.05]
pos = [-0.3, 0.5, -0.3]
fix = ["left"]

[material]
mass = 0.05
tri_ke = 500.0
tri_ka = 500.0
tri_kd = 0.5

[camera]
distance = 1.0
elevation = 25.0
azimuth = 30.0
at = [0.0, 0.2, 0.0]

[render]
width = 24
height = 24
{capacities}

[simulation]
fps = 30.0
substeps = 20
frames = 2

[fit]
free = ["stiffness"]
"""


def experiment(tmp_path, cells=12, capacities=""):
    return load_scene(write_scene(tmp_path, SWING.format(cells=cells, capacities=capacities))).experiment()


def test_the_default_is_exact_and_a_large_scene_gets_the_hint(tmp_path):
    exp = experiment(tmp_path)
    assert exp.faces.shape[0] == 288 > HINT_FACES
    assert (exp.settings.tile_capacity, exp.settings.pixel_capacity) == (288, 288)  # every face
    hint = capacity_hint(exp)
    assert "288 faces" in hint and "tile_capacity = 288" in hint and "pixel_capacity = 48" in hint
    assert "\n" not in hint
    assert capacity_hint(experiment(tmp_path, cells=8)) is None  # 128 faces: exact is cheap
    given = experiment(tmp_path, capacities="tile_capacity = 96\npixel_capacity = 24")
    assert (given.settings.tile_capacity, given.settings.pixel_capacity) == (96, 24)
    assert capacity_hint(given) is None


def test_fit_prints_the_hint(tmp_path, capsys):
    scene = write_scene(tmp_path, SWING.format(cells=12, capacities=""))
    assert main(["render", str(scene), "--out", str(tmp_path / "target")]) == 0
    assert main(["fit", str(scene), "--target", str(tmp_path / "target"), "--out", str(tmp_path / "run"),
                 "--iterations", "1", "--polish", "0", "--no-progress"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("hint: every one of")]
    assert len(lines) == 1, lines
