"""Stand-in for your phone: film the cloth of scene.toml, as a real camera would, for `gradsim-jax fit`.

    python examples/real_video/make_recording.py [FOLDER]    (default: recording/ beside this script)

It simulates scene.toml at its [material] values (the truth the fit should find) and films the cloth
through the camera of camera.yml with a small hard rasterizer written here in numpy, independent of
gradsim-jax's soft one: the calibrated pinhole (fx != fy, principal point off centre, a non-square image),
radial and tangential lens distortion (inverted by fixed-point iteration, without OpenCV), a z-buffer,
flat colours, 2 x 2 samples per pixel, a textured background and sensor noise. It writes into FOLDER

    video.mp4        the recording: H.264, no alpha
    mask/            one grey PNG per frame, white where the cloth covers the pixel (the covered fraction of
                     its samples), black elsewhere: what a segmentation or matting tool gives
    background.png   a photo of the empty scene from the same camera

scene.toml's [render] background_image names recording/background.png. With a real video you skip this
script: those three files come from your phone and your segmentation tool.
"""

import argparse
import warnings
from pathlib import Path

import imageio.v2 as imageio
import numpy as np

from gradsim_jax import sysid
from gradsim_jax.render.calibration import read_calibration
from gradsim_jax.render.video import write_mp4
from gradsim_jax.scenefile import load_scene

HERE = Path(__file__).resolve().parent
NOISE = 0.01  # standard deviation of the sensor noise, in [0, 1] colour units
SEED = 7


def rotation_from_rvec(rvec):
    """Rodrigues' formula: the rotation matrix [3, 3] of an OpenCV rotation vector [3] (axis times angle)."""
    rvec = np.asarray(rvec, np.float64)
    angle = np.linalg.norm(rvec)
    if angle < 1e-12:
        return np.eye(3)
    k = rvec / angle
    cross = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + np.sin(angle) * cross + (1.0 - np.cos(angle)) * cross @ cross


def undistorted_rays(fx, fy, cx, cy, distortion, height, width, samples=2):
    """Normalized image coordinates [H, W, s*s, 2] of the sub-pixel samples of a distorted camera: the
    Brown-Conrady distortion (k1, k2, p1, p2, k3) inverted by fixed-point iteration."""
    k1, k2, p1, p2, k3 = distortion
    offsets = (np.arange(samples) + 0.5) / samples - 0.5
    v, u, ov, ou = np.meshgrid(np.arange(height), np.arange(width), offsets, offsets, indexing="ij")
    xd = ((u + ou) - cx) / fx
    yd = ((v + ov) - cy) / fy
    x, y = xd.copy(), yd.copy()
    for _ in range(30):
        r2 = x * x + y * y
        radial = 1 + k1 * r2 + k2 * r2 ** 2 + k3 * r2 ** 3
        x = (xd - (2 * p1 * x * y + p2 * (r2 + 2 * x * x))) / radial
        y = (yd - (p1 * (r2 + 2 * y * y) + 2 * p2 * x * y)) / radial
    return np.stack([x, y], -1).reshape(height, width, samples * samples, 2)


def hard_render(points, faces, colors, rotation, tvec, rays, background):
    """Z-buffered flat-coloured triangles seen along `rays` [H, W, S, 2]: colour [H, W, 3] and covered
    fraction [H, W], each the mean over a pixel's S samples."""
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
    covered = np.isfinite(depth).reshape(height, width, samples).mean(axis=2)
    return color.reshape(height, width, samples, 3).mean(axis=2), covered


def textured_background(height, width):
    """A smooth colour field with a checker of tiles [H, W, 3]: clutter that the fit must not explain."""
    v, u = np.mgrid[0:height, 0:width] / max(height, width)
    rgb = np.stack([0.45 + 0.2 * np.sin(9 * u + 2 * v), 0.5 + 0.15 * np.cos(7 * v - 3 * u),
                    0.55 + 0.2 * np.sin(5 * u * v + 4 * v)], -1)
    rgb[(np.floor(u * 12) + np.floor(v * 12)) % 2 == 0] *= 0.85
    return rgb


def film(scene_path, folder):
    """Simulate the scene at its [material] values, film it, write the three files; returns the noiseless
    frames [T, H, W, 3] and masks [T, H, W] in [0, 1]."""
    spec = load_scene(scene_path)
    calibration = read_calibration(spec.resolve(spec.sections.camera.calibration))
    width, height = calibration.image_size
    exp = spec.experiment()
    positions, _ = sysid.simulate_video(exp, {})
    faces = np.asarray(exp.faces)
    colors = np.tile(spec.sections.render.color, (len(faces), 1))
    rotation, tvec = rotation_from_rvec(calibration.rvec), calibration.tvec
    rays = undistorted_rays(calibration.fx, calibration.fy, calibration.cx, calibration.cy,
                            calibration.distortion, height, width)
    background = textured_background(height, width)
    shots = [hard_render(np.asarray(x, np.float64), faces, colors, rotation, tvec, rays, background)
             for x in positions]
    frames, masks = np.stack([s[0] for s in shots]), np.stack([s[1] for s in shots])

    rng = np.random.default_rng(SEED)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_mp4(folder / "video.mp4", np.clip(frames + rng.normal(0.0, NOISE, frames.shape), 0.0, 1.0),
              fps=1.0 / exp.frame_dt)
    (folder / "mask").mkdir(exist_ok=True)
    for t, mask in enumerate(masks):
        imageio.imwrite(folder / "mask" / f"frame_{t:04d}.png", np.round(mask * 255).astype(np.uint8))
    photo = np.clip(background + rng.normal(0.0, NOISE, background.shape), 0.0, 1.0)
    imageio.imwrite(folder / "background.png", np.round(photo * 255).astype(np.uint8))
    return frames, masks


def main(argv=None):
    parser = argparse.ArgumentParser(description="Film the cloth of scene.toml as a calibrated camera would.")
    parser.add_argument("folder", nargs="?", type=Path, default=HERE / "recording",
                        help="where to write video.mp4, mask/ and background.png (default: %(default)s)")
    folder = parser.parse_args(argv).folder
    # imageio-ffmpeg starts ffmpeg with a fork while JAX's threads run; ffmpeg does not touch them.
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
    frames, _ = film(HERE / "scene.toml", folder)
    print(f"filmed {frames.shape[0]} frames of {frames.shape[2]} x {frames.shape[1]} px into {folder}: "
          "video.mp4, mask/, background.png")


if __name__ == "__main__":
    main()
