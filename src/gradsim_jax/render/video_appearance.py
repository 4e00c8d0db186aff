"""An object's appearance read off a video frame: the albedo of each vertex from the first frame, seen through the
scene's template (its vertices at that frame) and the shading the renderer would give them.

`albedo_from_frame` projects the vertices into the frame, averages the frame's colour over each vertex's
footprint (a Gaussian of half the projected spacing between neighbouring vertices, over the pixels the
object covers whole, alpha >= `INSIDE_ALPHA`, so that the background mixed into its edges does not bleed in), and divides by the light factor the renderer gives the
vertex (the mean of its faces' `shading.face_light_factor`): rendering the result under the same lights gives
the frame's colours back, up to the footprint's smoothing. Vertices outside the frame, behind the camera or
off the object's mask take the mean albedo of their seen neighbours (grown outwards along the mesh's edges),
or of every seen vertex. The fit then refines the albedo and the lights
(`sysid` quantities "albedo", "ambient", "directional", "light_direction").

The albedo is per vertex (`shading.VertexColors`, interpolated across faces), so a texture finer than the
mesh is smoothed to the mesh's resolution; a vertex-coloured render costs what a flat one does (about 1.15 x),
an image texture about 7 x (its aggregation is differentiated by autodiff), which is why it is not used here.
"""

from __future__ import annotations

import numpy as np

from gradsim_jax.render.camera import Camera, project_pixels
from gradsim_jax.render.shading import Lights, face_light_factor

#: Pixels whose alpha is at least this are the object's own colour; the others (its edges) are left out.
INSIDE_ALPHA = 0.95

#: The albedo read is kept inside (ALBEDO_MIN, 1 - ALBEDO_MIN), the open interval its fit's transform needs.
ALBEDO_MIN = 0.02


def vertex_colors_of_faces(faces, rgb, num_vertices: int) -> np.ndarray:
    """Per-vertex colours [V, 3]: the mean colour of the faces that use each vertex (exact for a part of one
    colour); a vertex of no face gets grey.

    Args:
        faces: [F, 3] int, vertex indices of each face.
        rgb: [F, 3] face colours in [0, 1].
        num_vertices: V.

    Returns:
        [V, 3] float32 RGB in [0, 1].
    """
    faces, rgb = np.asarray(faces), np.asarray(rgb, np.float64)
    total, count = np.zeros((num_vertices, 3)), np.zeros(num_vertices)
    for k in range(3):
        np.add.at(total, faces[:, k], rgb)
        np.add.at(count, faces[:, k], 1.0)
    out = np.full((num_vertices, 3), 0.5)
    used = count > 0
    out[used] = total[used] / count[used, None]
    return out.astype(np.float32)


def _gaussian_blur(image: np.ndarray, sigma: float) -> np.ndarray:
    """A separable Gaussian blur of an [H, W, C] image (edges clamped), numpy."""
    if sigma <= 0.25:
        return image
    radius = int(np.ceil(3 * sigma))
    t = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * (t / sigma) ** 2)
    kernel /= kernel.sum()
    out = image
    for axis in (0, 1):
        padded = np.pad(out, [(radius, radius) if a == axis else (0, 0) for a in range(3)], mode="edge")
        out = sum(w * np.take(padded, np.arange(k, k + image.shape[axis]), axis=axis) for k, w in enumerate(kernel))
    return out


def _bilinear(image: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """image [H, W, C] at pixel coordinates uv [N, 2] (column, row; pixel centres at whole numbers), clamped."""
    h, w = image.shape[:2]
    u, v = np.clip(uv[:, 0], 0, w - 1), np.clip(uv[:, 1], 0, h - 1)
    u0, v0 = np.floor(u).astype(int), np.floor(v).astype(int)
    u1, v1 = np.minimum(u0 + 1, w - 1), np.minimum(v0 + 1, h - 1)
    fu, fv = (u - u0)[:, None], (v - v0)[:, None]
    return ((1 - fu) * (1 - fv) * image[v0, u0] + fu * (1 - fv) * image[v0, u1] + (1 - fu) * fv * image[v1, u0]
            + fu * fv * image[v1, u1])


def albedo_from_frame(camera: Camera, vertices, faces, frame, lights: Lights, read, base) -> np.ndarray:
    """Per-vertex albedo [V, 3] read off one frame (module docstring).

    Args:
        camera: the camera that filmed the frame.
        vertices: [V, 3] m, the render vertices at that frame.
        faces: [F, 3] int, vertex indices of each face.
        frame: [H, W, 4] RGBA in [0, 1] at the camera's size (alpha: the object's mask; all ones when unknown).
        lights: the `Lights` the renderer shades with.
        read: [V] bool, the vertices whose albedo is read from the frame (the others keep `base`).
        base: [V, 3] RGB in [0, 1], the albedo of the vertices not read (and the fallback's shape).

    Returns:
        [V, 3] float32 albedo in [ALBEDO_MIN, 1 - ALBEDO_MIN] where read, `base` elsewhere.
    """
    x = np.asarray(vertices, np.float64)
    faces = np.asarray(faces)
    read = np.asarray(read, bool)
    out = np.array(base, np.float32)
    if not read.any():
        return out
    uv, z = (np.asarray(a, np.float64) for a in project_pixels(camera, x.astype(np.float32)))
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    edges = edges[read[edges].all(axis=1)]
    spacing = float(np.median(np.linalg.norm(uv[edges[:, 0]] - uv[edges[:, 1]], axis=1))) if len(edges) else 1.0
    frame = np.asarray(frame, np.float64)
    inside = (frame[..., 3:4] >= INSIDE_ALPHA).astype(np.float64)  # edge pixels mix in the background
    blurred = _gaussian_blur(np.concatenate([frame[..., :3] * inside, inside], axis=-1), 0.5 * spacing)
    sample = _bilinear(blurred, uv)
    h, w = frame.shape[:2]
    seen = (read & (z > float(camera.near)) & (uv[:, 0] >= -0.5) & (uv[:, 0] <= w - 0.5) & (uv[:, 1] >= -0.5)
            & (uv[:, 1] <= h - 0.5) & (sample[:, 3] > 0.1))
    color = sample[:, :3] / np.maximum(sample[:, 3:4], 1e-6)
    light = np.asarray(face_light_factor(lights, x[faces].astype(np.float32), np.asarray(camera.eye, np.float32)),
                       np.float64)
    per_vertex = vertex_colors_of_faces(faces, light, len(x)).astype(np.float64)
    albedo = color / np.maximum(per_vertex, 1e-3)
    albedo = _filled(albedo, seen, edges)
    out[read] = np.clip(albedo[read], ALBEDO_MIN, 1.0 - ALBEDO_MIN)
    return out


def _filled(values: np.ndarray, known: np.ndarray, edges: np.ndarray, passes: int = 8) -> np.ndarray:
    """values [V, C] where `known`; the others the mean of their known neighbours along `edges` [E, 2], grown
    outwards `passes` times, then the mean of every known value (grey when none is known)."""
    values, known = values.copy(), known.copy()
    for _ in range(passes):
        total, count = np.zeros_like(values), np.zeros(len(values))
        for a, b in ((edges[:, 0], edges[:, 1]), (edges[:, 1], edges[:, 0])):
            has = known[b]
            np.add.at(total, a[has], values[b[has]])
            np.add.at(count, a[has], 1.0)
        new = ~known & (count > 0)
        if not new.any():
            break
        values[new] = total[new] / count[new, None]
        known = known | new
    fallback = values[known].mean(axis=0) if known.any() else np.full(values.shape[1], 0.5)
    return np.where(known[:, None], values, fallback)
