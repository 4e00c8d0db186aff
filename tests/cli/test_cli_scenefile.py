"""Scene files: strict validation with errors naming the key and the file; OBJ meshes; help from the schema."""

import re

import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.scenefile import SCHEMA, SceneFileError, help_text, load_scene, read_obj

from cli_scenes import small_run, write_scene

GOOD = """
[scene]
grid = [2, 2]
cell = [0.2, 0.2]
fix = ["left"]
""" + small_run(4)


def write(tmp_path, text, name="scene.toml"):
    return write_scene(tmp_path, text, name)


def test_good_scene_builds(tmp_path):
    spec = load_scene(write(tmp_path, GOOD))
    exp = spec.experiment()
    assert exp.frames == 4 and exp.substeps == 8
    assert exp.camera.width == 16
    assert spec.fit_config.free == ("mass",)
    assert np.asarray(exp.topology.particles.pinned).sum() == 3


@pytest.mark.parametrize("text, key", [
    (GOOD.replace("[fit]", "[fit]\nlearning_rat = 0.1"), "learning_rat"),
    (GOOD.replace("frames = 4", "frames = 4.5"), "frames"),
    (GOOD.replace("cell = [0.2, 0.2]", "cell = [0.2]"), "cell"),
    (GOOD.replace('fix = ["left"]', 'fix = "left"'), "fix"),
    (GOOD + "\n[lighting]\nambient = 1.0\n", "lighting"),
    (GOOD.replace('free = ["mass"]', 'free = ["colour"]'), "free"),
    (GOOD.replace('free = ["mass"]', ''), "free"),
])
def test_bad_scene_names_key_and_file(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(SceneFileError) as e:
        load_scene(path)
    assert key in str(e.value) and str(path) in str(e.value)
    assert isinstance(e.value, ValueError)


def test_missing_mesh(tmp_path):
    no_geometry = GOOD.replace("grid = [2, 2]\n", "")
    with pytest.raises(SceneFileError, match=r"scene\.toml.*'grid' or 'mesh'"):
        load_scene(write(tmp_path, no_geometry)).experiment()
    missing = GOOD.replace("grid = [2, 2]", 'mesh = "nowhere.obj"').replace('fix = ["left"]', "pinned = [0]")
    path = write(tmp_path, missing)
    with pytest.raises(SceneFileError, match=r"mesh file not found.*nowhere\.obj") as e:
        load_scene(path)
    assert str(path) in str(e.value)


def test_obj_mesh_scene(tmp_path):
    (tmp_path / "quad.obj").write_text("# two triangles\nv 0 0 0\nv 0.3 0 0\nv 0.3 0.3 0\nv 0 0.3 0\n"
                                       "f 1/1 2/2 3/3 4/4\n")
    vertices, faces = read_obj(tmp_path / "quad.obj")
    assert vertices.shape == (4, 3) and faces.tolist() == [[0, 1, 2], [0, 2, 3]]
    text = GOOD.replace("grid = [2, 2]", 'mesh = "quad.obj"').replace('fix = ["left"]', "pinned = [0, 3]")
    exp = load_scene(write(tmp_path, text)).experiment()
    assert exp.faces.shape == (2, 3)
    assert np.asarray(exp.topology.particles.pinned).tolist() == [True, False, False, True]


def test_not_toml(tmp_path):
    with pytest.raises(SceneFileError, match="not valid TOML"):
        load_scene(write(tmp_path, "[scene\ngrid = "))


def test_fit_help_documents_every_field(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = capsys.readouterr().out
    assert text.count("\n") > 40
    for section, fields in SCHEMA.items():
        assert f"[{section}]" in text
        for key in fields:
            assert re.search(rf"^\s+{re.escape(key)}\s", text, re.M), key
    assert help_text().splitlines()[0] in text


def test_cli_reports_bad_scene(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("[fit]", "[fit]\nbogus = 1"))
    assert main(["fit", str(path), "--target", str(tmp_path / "none.gif")]) == 2
    err = capsys.readouterr().err
    assert "bogus" in err and str(path) in err and "Traceback" not in err
