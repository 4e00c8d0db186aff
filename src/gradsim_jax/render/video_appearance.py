"""An object's appearance read off a video frame: the albedo of each face from the first frame, seen through the
scene's template (its vertices at that frame) and the shading the renderer would give them.

`albedo_from_frame` projects the faces into the frame, averages the frame's colour over the pixel centres inside
each projected triangle, at least `EDGE_MARGIN_PX` from its edges (all of them for a thin one), that the object
covers whole (alpha >= `INSIDE_ALPHA`, so that the background mixed into
its edges does not bleed in), and divides by the light factor the renderer gives the face
(`shading.face_light_factor`): rendering the result under the same lights gives the frame's colours back,
face by face. A face smaller than a pixel reads the frame around its centroid; faces outside the frame, behind
the camera or off the object's mask take the mean albedo of their seen neighbours (grown outwards across shared
edges), or of every seen face. The fit then refines the albedo and the lights (`sysid` quantities "albedo",
"ambient", "directional", "light_direction").

The albedo is per face (`shading.FaceColors`), so a texture finer than the mesh is averaged over each triangle;
a face-coloured render is the renderer's cheapest (per-vertex colours cost about 1.15 x, an image texture
about 7 x: its aggregation is differentiated by autodiff, which is why it is not used here).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gradsim_jax.render.blur import blur_host
from gradsim_jax.render.camera import Camera, project_pixels
from gradsim_jax.render.shading import Lights, face_light_factor, sample_bilinear

#: Pixels whose alpha is at least this are the object's own colour; the others (its edges) are left out.
INSIDE_ALPHA = 0.95

#: Pixel centres closer than this to a face's edge are left out of its mean: the renderer (and a camera) mix
#: the colours of faces that meet within about a pixel.
EDGE_MARGIN_PX = 0.75

#: The albedo read is kept inside (ALBEDO_MIN, 1 - ALBEDO_MIN), the open interval its fit's transform needs.
ALBEDO_MIN = 0.02


def _triangle_means(uv: np.ndarray, faces: np.ndarray, image: np.ndarray, weight: np.ndarray):
    """For each face projected to pixel coordinates uv [V, 2]: the weighted mean of image [H, W, C] over the pixel
    centres inside its triangle, and the weight summed ([F, C], [F])."""
    h, w = image.shape[:2]
    total, count = np.zeros((len(faces), image.shape[-1])), np.zeros(len(faces))
    for f, tri in enumerate(uv[faces]):
        lo = np.maximum(np.floor(tri.min(0)).astype(int), 0)
        hi = np.minimum(np.ceil(tri.max(0)).astype(int), [w - 1, h - 1])
        if np.any(hi < lo):
            continue
        cols, rows = np.meshgrid(np.arange(lo[0], hi[0] + 1), np.arange(lo[1], hi[1] + 1))
        p = np.stack([cols.ravel(), rows.ravel()], -1).astype(np.float64)
        a, b, c = tri
        det = (b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])
        if abs(det) < 1e-12:
            continue
        l1 = ((p[:, 0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (p[:, 1] - a[1])) / det
        l2 = ((b[0] - a[0]) * (p[:, 1] - a[1]) - (p[:, 0] - a[0]) * (b[1] - a[1])) / det
        # Distances (pixels) of each pixel centre from the three edges: barycentric times the edge's height.
        heights = abs(det) / np.maximum(np.linalg.norm([c - b, c - a, b - a], axis=1), 1e-12)
        dist = np.stack([(1 - l1 - l2) * heights[0], l1 * heights[1], l2 * heights[2]], -1).min(-1)
        inside = dist >= EDGE_MARGIN_PX
        if not inside.any():  # a thin triangle: every pixel centre in it
            inside = dist >= 0.0
        r, cc = rows.ravel()[inside], cols.ravel()[inside]
        wt = weight[r, cc]
        total[f] = (image[r, cc] * wt[:, None]).sum(0)
        count[f] = wt.sum()
    return total, count


def albedo_from_frame(camera: Camera, vertices, faces, frame, lights: Lights, read, base) -> np.ndarray:
    """Per-face albedo [F, 3] read off one frame (module docstring).

    Args:
        camera: the camera that filmed the frame.
        vertices: [V, 3] m, the render vertices at that frame.
        faces: [F, 3] int, vertex indices of each face.
        frame: [H, W, 4] RGBA in [0, 1] at the camera's size (alpha: the object's mask; all ones when unknown).
        lights: the `Lights` the renderer shades with.
        read: [F] bool, the faces whose albedo is read from the frame (the others keep `base`).
        base: [F, 3] RGB in [0, 1], the albedo of the faces not read.

    Returns:
        [F, 3] float32 albedo in [ALBEDO_MIN, 1 - ALBEDO_MIN] where read, `base` elsewhere.
    """
    x = np.asarray(vertices, np.float64)
    faces = np.asarray(faces)
    read = np.asarray(read, bool)
    out = np.array(base, np.float32)
    if not read.any():
        return out
    uv, z = (np.asarray(a, np.float64) for a in project_pixels(camera, x.astype(np.float32)))
    frame = np.asarray(frame, np.float64)
    inside = (frame[..., 3] >= INSIDE_ALPHA).astype(np.float64)  # edge pixels mix in the background
    total, count = _triangle_means(uv, faces, frame[..., :3], inside)
    # A face smaller than a pixel, or on the mask's rim: the frame around its centroid, over a pixel's footprint.
    centre = uv[faces].mean(axis=1)
    stack = np.concatenate([frame[..., :3] * inside[..., None], inside[..., None]], -1)  # [H, W, 4]
    blurred = np.moveaxis(blur_host(np.moveaxis(stack, -1, 0), 0.7), 0, -1)
    h, w = frame.shape[:2]
    texel = np.stack([(centre[:, 0] + 0.5) / w, 1.0 - (centre[:, 1] + 0.5) / h], -1)  # pixel -> texture coords
    near = np.asarray(sample_bilinear(jnp.asarray(blurred, jnp.float32), jnp.asarray(texel, jnp.float32)),
                      np.float64)
    in_front = (z[faces] > float(camera.near)).all(axis=1)
    seen_inside = read & in_front & (count >= 1.0)
    seen_near = read & in_front & ~seen_inside & (near[:, 3] > 0.25)
    color = np.where(seen_inside[:, None], total / np.maximum(count, 1e-9)[:, None],
                     near[:, :3] / np.maximum(near[:, 3:4], 1e-9))
    light = np.asarray(face_light_factor(lights, x[faces].astype(np.float32), np.asarray(camera.eye, np.float32)),
                       np.float64)
    albedo = color / np.maximum(light, 1e-3)
    albedo = _filled(albedo, seen_inside | seen_near, _face_pairs(faces[read], np.flatnonzero(read)))
    out[read] = np.clip(albedo[read], ALBEDO_MIN, 1.0 - ALBEDO_MIN)
    return out


def _face_pairs(faces: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Pairs [P, 2] of the faces (numbered by `index`) that share an edge."""
    edges = {}
    pairs = []
    for f, tri in zip(index, faces):
        for a, b in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0])):
            key = (min(a, b), max(a, b))
            if key in edges:
                pairs.append((edges[key], f))
            else:
                edges[key] = f
    return np.asarray(pairs, int).reshape(-1, 2)


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
