"""[render] appearance = "video": the cloth's albedo read off the target's first frame and fitted with the lights
as nuisance quantities. A target rendered with a checkerboard under other lights than the scene file says:
the flat grey the file gives misses its colours, the albedo read off frame 0 reproduces frame 0, and the job
frees the appearance's quantities beside the physics (the polish and the identifiability report hold them)."""

import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.cli import main
from gradsim_jax.scenefile import SceneFileError, load_fit_job
from gradsim_jax.sysid.prediction import psnr
from gradsim_jax.sysid.quantities import polished

from cli_scenes import write_scene

TRUTH = """
[scene]
grid = [6, 6]
cell = [0.06, 0.06]
pos = [-0.18, 0.0, -0.18]
rot = [0.7071068, 0.7071068, 0.0, 0.0]
fix = ["left"]

[material]
mass = 0.02

[camera]
distance = 1.2
elevation = 35.0
azimuth = 25.0

[render]
width = 48
height = 36
{look}

[simulation]
frames = 3
substeps = 8

[fit]
free = ["mass"]
"""

LIGHTS = "ambient = 0.3\ndirectional = 0.8\nlight_direction = [0.6, 1.0, 0.2]"


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    folder = tmp_path_factory.mktemp("appearance")
    truth = write_scene(folder, TRUTH.format(look=LIGHTS), "truth.toml")
    assert main(["render", str(truth), "--out", str(folder / "target")]) == 0
    return folder


def job(folder, appearance):
    look = f'color = [0.6, 0.6, 0.6]\nappearance = "{appearance}"'
    path = write_scene(folder, TRUTH.format(look=look) + '\n[target]\nvideo = "target"\n', f"{appearance}.toml")
    return load_fit_job(path)


def test_the_albedo_read_off_frame_0_reproduces_it(target):
    flat, video = job(target, "flat"), job(target, "video")
    assert tuple(video.config.free) == ("mass", "albedo", "ambient", "directional", "light_direction")
    assert polished(video.config.free) == ("mass",)
    assert "appearance: albedo read from the first frame, fitted with the lights" in video.notes
    assert video.initial["albedo"].shape == (72, 3)  # per face
    first = video.frames[0]
    inside = first[..., 3] > 0.5
    scores = {}
    for name, j in (("flat", flat), ("video", video)):
        _, frames = sysid.simulate_video(j.experiment, j.initial)
        scores[name] = psnr(frames[0], first, inside)
    # Grey against a checkerboard: about 12 dB; per-vertex colours of a 6 x 6 grid against per-face checker
    # squares: the squares' edges blur over a vertex spacing, yet the mean error falls several-fold.
    assert scores["video"] > scores["flat"] + 6.0, scores


def test_a_bad_appearance_is_refused(target):
    with pytest.raises(SceneFileError, match=r"\[render\] appearance must be one of 'flat', 'video', got 'photo'"):
        job(target, "photo")


def test_shadows_add_their_nuisances_and_start_from_the_files_light(target):
    """[render] shadows = true: the shadow's strength and softness and the light's direction are fitted; a video
    with no shadow to read (this one: a black background) starts the light where [render] puts it."""
    look = 'color = [0.6, 0.6, 0.6]\nshadows = true\nlight_direction = [0.2, 1.0, 0.3]'
    path = write_scene(target, TRUTH.format(look=look) + '\n[target]\nvideo = "target"\n', "shadows.toml")
    j = load_fit_job(path)
    assert tuple(j.config.free) == ("mass", "shadow", "shadow_blur", "light_direction")
    assert polished(j.config.free) == ("mass",)
    assert float(j.initial["shadow"]) == 0.5 and float(j.initial["shadow_blur"]) == 1.0
    np.testing.assert_array_equal(j.initial["light_direction"], np.float32([0.2, 1.0, 0.3]))
    assert "appearance: the shadow on the ground fitted" in j.notes
