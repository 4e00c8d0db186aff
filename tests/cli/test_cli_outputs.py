"""What a run writes and says it wrote (issue 52): a fit refuses an output folder where it would overwrite its
own input (the worked example once wrote target.gif over the target.gif it had read), and every run's last line
names report.html, the page the README says to open."""

import pytest

from gradsim_jax.cli import main
from gradsim_jax.sysid import FIT_OUTPUTS, outputs_line

SCENE = """
[scene]
grid = [2, 2]
cell = [0.1, 0.1]
fix = ["top"]

[render]
width = 8
height = 8

[simulation]
frames = 3

[fit]
free = ["mass"]
"""


@pytest.fixture
def scene(tmp_path):
    path = tmp_path / "scene.toml"
    path.write_text(SCENE)
    return path


def test_fit_refuses_to_write_over_its_target(scene, tmp_path, capsys):
    out = tmp_path / "runs"
    out.mkdir()
    target = out / "target.gif"
    target.write_bytes(b"the user's video")
    assert main(["fit", str(scene), "--target", str(target), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--target {target} lies where the fit writes its outputs" in err and "pass another --out" in err
    assert target.read_bytes() == b"the user's video"


@pytest.mark.parametrize("where", ["folder", "checkpoint", "scene file"])
def test_fit_refuses_an_output_folder_holding_any_of_its_inputs(scene, tmp_path, capsys, where):
    out = tmp_path / "runs"
    if where == "folder":  # a folder of PNG frames used as the output folder
        out.mkdir()
        args = ["--target", str(out)]
        named = f"--target {out} is the output folder"
    elif where == "checkpoint":
        (out / "checkpoint").mkdir(parents=True)
        mask = out / "checkpoint" / "mask.gif"
        mask.write_bytes(b"mask")
        (tmp_path / "video.gif").write_bytes(b"video")
        args = ["--target", str(tmp_path / "video.gif"), "--mask", str(mask)]
        named = f"--mask {mask} lies where the fit writes its outputs"
    else:  # [target] video in the scene file, resolved against the scene's folder
        out = tmp_path
        scene.write_text(SCENE + '\n[target]\nvideo = "report.json"\n')
        args = []
        named = f"[target] video {tmp_path / 'report.json'} lies where"
    assert main(["fit", str(scene), *args, "--out", str(out)]) == 2
    assert named in capsys.readouterr().err


def test_outputs_line_names_every_file_and_the_page_to_open(tmp_path):
    for name in FIT_OUTPUTS:
        (tmp_path / name).write_text("")
    (tmp_path / "checkpoint").mkdir()
    line = outputs_line(tmp_path, 12.34)
    assert line.startswith(f"outputs written to {tmp_path.resolve()}: comparison.mp4, fitted.gif, initial.gif, ")
    assert "report.html, report.json, target.gif (open report.html); total time 12.3 s" in line
    assert "checkpoint" not in line
