"""The "Your own video" guide's walk-through (docs/howto/own-video.md), run as written, on a target our renderer did not make.

The commands are read from that page and run in a temporary copy of the repository's
`examples/real_video/`: `make_recording.py` films the cloth of `scene.toml` with its own numpy hard
rasterizer (the calibrated, distorted camera of `camera.yml`, a z-buffer, flat colours, 2 x 2 samples per
pixel, a textured background, noise, an H.264 MP4 without alpha, a mask folder, a photo of the empty
background); `gradsim-jax fit` then undistorts the frames, composites its render over the photo, and
recovers mass and stiffness from 35 % off, once with the mask and once from the colours alone, each to
the 2 % issue 7 asks for (measured: 3e-5 and 3e-4 with the mask, 9e-5 and 1.4e-3 without).
"""

import json
import re
import runpy
import shlex
import shutil
import sys
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.scenefile import load_scene

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Path("examples") / "real_video"
NATIVE = (144, 192)  # (height, width) of camera.yml's frames


def readme_commands() -> list[list[str]]:
    """The shell commands of the "Your own video" guide (docs/howto/own-video.md), as argument lists."""
    section = (ROOT / "docs" / "howto" / "own-video.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            args = shlex.split(line, comments=True)
            if args:
                commands.append(args)
    return commands


def command(kind: str) -> list[str]:
    """The README's recording command ("record"), or its fit command with ("mask") or without ("rgb") a mask."""
    commands = readme_commands()
    if kind == "record":
        found = [c for c in commands if c[0] == "python"]
    else:
        found = [c for c in commands if c[:2] == ["gradsim-jax", "fit"] and ("--mask" in c) == (kind == "mask")]
    assert len(found) == 1, (kind, commands)
    return found[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A copy of examples/real_video/ in which the README's recording command has been run; returns the
    copy's root and the recording script's globals (its camera and rasterizer)."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / EXAMPLE, root / EXAMPLE, ignore=shutil.ignore_patterns("recording", "__pycache__"))
    args = command("record")
    assert args[1] == str(EXAMPLE / "make_recording.py")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setattr(sys, "argv", args[1:])
        script = runpy.run_path(args[1], run_name="__main__")
    return root, script


def fit(root, args, out_path, monkeypatch):
    """Run a README fit command in the copy; its report."""
    monkeypatch.chdir(root)
    assert main(args[1:]) == 0
    return json.loads((root / out_path / "report.json").read_text())


def true_values(root):
    theta = load_scene(root / EXAMPLE / "scene.toml").experiment().theta
    return {name: float(theta[name]) for name in ("mass", "stiffness")}


def test_recording_is_what_the_camera_sees(workdir):
    """Sanity of the target itself: an MP4 without alpha, the cloth in view and off centre, the mask
    white exactly where the video differs from the photo of the empty scene."""
    root, script = workdir
    recording = root / EXAMPLE / "recording"
    frames = np.stack(imageio.mimread(recording / "video.mp4")).astype(np.float64) / 255
    masks = np.stack([imageio.imread(p) for p in sorted((recording / "mask").glob("*.png"))]) / 255
    background = imageio.imread(recording / "background.png") / 255
    assert frames.shape == (15, *NATIVE, 3) and masks.shape == (15, *NATIVE)
    assert background.shape == (*NATIVE, 3)
    assert np.abs(background - script["textured_background"](*NATIVE)).max() < 0.06  # the photo is noisy
    assert 0.05 < (masks[0] > 0.5).mean() < 0.6
    differs = np.abs(frames - background).max(-1) > 0.15
    assert np.mean(differs[masks == 1.0]) > 0.97 and np.mean(differs[masks == 0.0]) < 0.01


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores): an end-to-end run; `make test-all` runs it
def test_fit_with_mask_recovers_mass_and_stiffness(workdir, monkeypatch):
    root, _ = workdir
    args = command("mask")
    report = fit(root, args, args[args.index("--out") + 1], monkeypatch)
    assert report["target"]["alpha"] == "mask" and report["target"]["undistorted"]
    assert report["target"]["native_size"] == list(NATIVE)
    assert report["target"]["background_image"] == "recording/background.png"
    conv = report["convergence"]
    assert conv["final_loss"] < 0.05 * conv["initial_loss"]
    assert report["identifiability"]["valid"] == conv["converged"]
    for name, truth in true_values(root).items():
        assert abs(report["estimated"][name] / truth - 1) < 0.02, (name, report["estimated"])


@pytest.mark.slow  # the README command end to end; the masked fit checks a real-video fit in make test
def test_fit_without_mask_runs_on_colours_over_the_photo(workdir, monkeypatch):
    """No mask, an MP4 without alpha: the default loss is rgb, the render composited over the photo. The
    README's command as written, cut to a few iterations for the CI budget (its accuracy, 8.6e-5 and 1.4e-3,
    is measured in the README; the masked fit above checks accuracy end to end)."""
    root, _ = workdir
    args = command("rgb") + ["--iterations", "4", "--polish", "0"]
    report = fit(root, args, args[args.index("--out") + 1], monkeypatch)
    assert report["target"]["alpha"] is None and report["target"]["undistorted"]
    assert report["inputs"]["loss"] == "rgb"
    conv = report["convergence"]
    assert conv["final_loss"] < conv["initial_loss"]
    for name, truth in true_values(root).items():  # 4 steps from 35 % off move towards the truth
        assert abs(report["estimated"][name] / truth - 1) < abs(report["initial"][name] / truth - 1), name


@pytest.mark.parametrize("loss", ["rgba", "silhouette"])
def test_alpha_losses_refuse_a_target_without_alpha(workdir, monkeypatch, capsys, loss):
    root, _ = workdir
    monkeypatch.chdir(root)
    assert main(command("rgb")[1:] + ["--loss", loss]) == 2
    err = capsys.readouterr().err
    assert "--mask" in err and "alpha channel" in err and "--key-color" in err
