"""The real-video path end to end, on a target our renderer did not make.

A cloth is simulated, then filmed by a small, independent hard rasterizer written here in numpy: a
calibrated camera (fx != fy, principal point off centre, a non-square image, a pose given as OpenCV
rvec/tvec, radial and tangential lens distortion), a z-buffer, flat colours, 2 x 2 samples per pixel, in
front of a textured background, with sensor noise, written as an H.264 MP4 (no alpha). `gradsim-jax fit`
then undistorts the frames, composites its render over a photo of the empty background, and recovers mass
and stiffness from 35 % off (to about 1 % and 3 %).
"""

import json

import imageio.v2 as imageio
import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.cli import main
from gradsim_jax.render.camera import Camera, pose_vector
from gradsim_jax.render.video import write_mp4
from gradsim_jax.scenefile import load_scene

NATIVE = (144, 192)  # (height, width) of the camera's frames
FX, FY, CX, CY = 208.0, 196.0, 101.4, 66.4
DISTORTION = [-0.12, 0.03, 0.002, -0.001, 0.0]
EYE, AT = (0.5, 0.4, 0.75), (0.0, -0.18, 0.0)

SCENE = """
[scene]
grid = [4, 4]
cell = [0.15, 0.15]
pos = [-0.3, 0.0, -0.3]
rot = [0.7071068, 0.7071068, 0.0, 0.0]
fix = ["left"]

[material]
mass = 0.01
tri_ke = 200.0
tri_ka = 200.0
tri_kd = 0.5

[push]
force = [0.0, 0.3, 0.18]
particles = [4, 9, 14, 19, 24]
frames = 6

[camera]
fx = {fx}
fy = {fy}
cx = {cx}
cy = {cy}
image_size = [{width}, {height}]
distortion = {distortion}
rvec = {rvec}
tvec = {tvec}

[render]
width = 64
height = 48
color = [0.9, 0.35, 0.15]
ambient = 1.0
directional = 0.0
background_image = "background.png"

[simulation]
fps = 30.0
substeps = 32
frames = 14

[fit]
free = ["mass", "stiffness"]
iterations = 40
learning_rate = 0.05
polish = 20

[initial]
mass = 0.0135
stiffness = 130.0
"""


def undistorted_rays(k1, k2, p1, p2, k3, height, width, samples=2):
    """Normalized image coordinates [H, W, s*s, 2] of sub-pixel samples, with the Brown-Conrady distortion
    inverted by fixed-point iteration (independent of OpenCV)."""
    offsets = (np.arange(samples) + 0.5) / samples - 0.5
    v, u, ov, ou = np.meshgrid(np.arange(height), np.arange(width), offsets, offsets, indexing="ij")
    xd = ((u + ou) - CX) / FX
    yd = ((v + ov) - CY) / FY
    x, y = xd.copy(), yd.copy()
    for _ in range(30):
        r2 = x * x + y * y
        radial = 1 + k1 * r2 + k2 * r2 ** 2 + k3 * r2 ** 3
        x = (xd - (2 * p1 * x * y + p2 * (r2 + 2 * x * x))) / radial
        y = (yd - (p1 * (r2 + 2 * y * y) + 2 * p2 * x * y)) / radial
    return np.stack([x, y], -1).reshape(height, width, samples * samples, 2)


def hard_render(points, faces, colors, rotation, tvec, rays, background):
    """Z-buffered flat-coloured triangles [H, W, 3], each pixel the mean of its samples."""
    cam = points @ rotation.T + tvec
    proj = cam[:, :2] / cam[:, 2:3]
    height, width, samples, _ = rays.shape
    p = rays.reshape(-1, 2)
    depth = np.full(p.shape[0], np.inf)
    color = np.repeat(background.reshape(-1, 1, 3), samples, axis=1).reshape(-1, 3)
    for f, tri in enumerate(faces):
        a, b, c = proj[tri]
        det = (b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])
        if abs(det) < 1e-12:
            continue
        l1 = ((p[:, 0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (p[:, 1] - a[1])) / det
        l2 = ((b[0] - a[0]) * (p[:, 1] - a[1]) - (p[:, 0] - a[0]) * (b[1] - a[1])) / det
        l0 = 1.0 - l1 - l2
        inside = (l0 >= 0) & (l1 >= 0) & (l2 >= 0)
        z = 1.0 / (l0 / cam[tri[0], 2] + l1 / cam[tri[1], 2] + l2 / cam[tri[2], 2])
        closer = inside & (z < depth)
        depth[closer] = z[closer]
        color[closer] = colors[f]
    return color.reshape(height, width, samples, 3).mean(axis=2)


def textured_background(height, width):
    v, u = np.mgrid[0:height, 0:width] / max(height, width)
    rgb = np.stack([0.45 + 0.2 * np.sin(9 * u + 2 * v), 0.5 + 0.15 * np.cos(7 * v - 3 * u),
                    0.55 + 0.2 * np.sin(5 * u * v + 4 * v)], -1)
    rgb[(np.floor(u * 12) + np.floor(v * 12)) % 2 == 0] *= 0.85  # tiles: texture the fit must not explain
    return rgb.astype(np.float64)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """The scene file, an MP4 of the cloth filmed by the numpy camera, and a photo of the background."""
    folder = tmp_path_factory.mktemp("recording")
    height, width = NATIVE
    look = Camera.from_intrinsics(FX, FY, CX, CY, width, height, eye=EYE, at=AT)
    pose = pose_vector(look)
    text = SCENE.format(fx=FX, fy=FY, cx=CX, cy=CY, width=width, height=height, distortion=DISTORTION,
                        rvec=pose[:3].tolist(), tvec=pose[3:].tolist())
    scene = folder / "scene.toml"
    scene.write_text(text)
    spec = load_scene(scene)
    exp = spec.experiment()
    x, _ = sysid.simulate_video(exp, {})
    faces = np.asarray(exp.faces)
    colors = np.tile([0.9, 0.35, 0.15], (len(faces), 1))  # flat colours, unlit
    rotation, tvec = np.asarray(look.rotation, np.float64), np.asarray(look.translation, np.float64)
    rays = undistorted_rays(*DISTORTION, height, width)
    background = textured_background(height, width)
    imageio.imwrite(folder / "background.png", np.round(background * 255).astype(np.uint8))
    rng = np.random.default_rng(7)
    frames = np.stack([hard_render(np.asarray(xt, np.float64), faces, colors, rotation, tvec, rays, background)
                       for xt in x])
    frames = np.clip(frames + rng.normal(0.0, 0.01, frames.shape), 0.0, 1.0)
    write_mp4(folder / "video.mp4", frames, fps=30.0)
    return scene, folder / "video.mp4", frames


def test_recording_is_what_the_camera_sees(recording):
    """Sanity of the target itself: the cloth is in view, off centre, and the mp4 has no alpha."""
    _, video, frames = recording
    assert frames.shape == (15, *NATIVE, 3)
    background = textured_background(*NATIVE)
    covered = np.abs(frames[0] - background).max(-1) > 0.1
    assert 0.05 < covered.mean() < 0.6
    assert imageio.mimread(video)[0].shape == (*NATIVE, 3)


def test_fit_own_video_recovers_mass_and_stiffness(recording, tmp_path):
    scene, video, _ = recording
    out = tmp_path / "fit"
    rc = main(["fit", str(scene), "--target", str(video), "--true", "--out", str(out), "--no-progress"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["target"]["alpha"] is None and report["target"]["undistorted"]
    assert report["target"]["native_size"] == list(NATIVE)
    # The soft rasterizer's edges are not a camera's box-filtered ones: the residual stays well above the
    # noise, the report says so (not converged: the video is not fully explained), and the estimates carry
    # a few percent of that model error (issue 7 asks for 2 %: not reached yet).
    conv = report["convergence"]
    assert conv["final_loss"] < 0.1 * conv["initial_loss"]
    assert not conv["converged"] and conv["floor_ratio"] > 4 and report["identifiability"]["valid"] is False
    for name, err in report["relative_error"].items():
        assert err < 0.05, (name, err, report["estimated"])


def test_alpha_losses_refuse_a_target_without_alpha(recording, tmp_path, capsys):
    scene, video, _ = recording
    rc = main(["fit", str(scene), "--target", str(video), "--loss", "rgba", "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--mask" in err and "alpha channel" in err and "--key-color" in err
