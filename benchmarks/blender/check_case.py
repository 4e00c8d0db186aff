"""Self-check of a Blender cloth case folder (made by make_cloth_videos.py), with numpy and the standard library only.

    python benchmarks/blender/check_case.py tests/data/blender            # every case folder under it
    python benchmarks/blender/check_case.py benchmarks/blender/data/swing  # one case

Checks: the files are there; frames/ and masks/ hold as many PNGs as vertices.npy has frames and case.json says;
every PNG has camera.json's resolution, frames are RGB (no alpha), masks 8-bit grey; vertices.npy is float32
[frames, (dim_x + 1)(dim_y + 1), 3], faces.npy int32 [2 dim_x dim_y, 3] with the grid's triangles; frame 0 is the
grid of case.json; and the mask matches the cloth projected by the camera (pinhole model, `project`): nearly
every projected vertex falls on the mask, and the projected triangles' silhouette overlaps the mask (IoU).
`check_case` returns the numbers; the command prints them and exits 1 if a check fails.
"""

import json
import os
import struct
import sys
import zlib

import numpy as np

MIN_VERTEX_HIT = 0.95  # fraction of projected vertices on the mask (occluded ones aside, few here)
MIN_IOU = 0.85  # silhouette of the projected triangles vs mask > 0.5, per frame


def read_png(path):
    """Decode an 8-bit, non-interlaced PNG (grey, grey+alpha, RGB, RGBA) with zlib and numpy.

    Args:
        path: the file.

    Returns:
        uint8 [H, W] (grey) or [H, W, C].
    """
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: only 8-bit non-interlaced grey/RGB(A) PNGs are read (depth {depth}, "
                         f"colour type {colour}, interlace {interlace})")
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(height, 1 + width * channels)
    out = np.zeros((height, width * channels), np.int32)
    prior = np.zeros(width * channels, np.int32)
    for r in range(height):
        out[r] = _unfilter(int(raw[r, 0]), raw[r, 1:].astype(np.int32), prior, channels)
        prior = out[r]
    img = out.astype(np.uint8).reshape(height, width, channels)
    return img[:, :, 0] if channels == 1 else img


def _unfilter(kind, line, prior, bpp):
    if kind == 0:
        return line
    if kind == 1:
        return np.cumsum(line.reshape(-1, bpp), 0).reshape(-1) % 256
    if kind == 2:
        return (line + prior) % 256
    rec = line.copy()
    for x in range(len(rec)):
        left = rec[x - bpp] if x >= bpp else 0
        up = prior[x]
        if kind == 3:
            rec[x] = (rec[x] + (left + up) // 2) % 256
            continue
        corner = prior[x - bpp] if x >= bpp else 0
        p = left + up - corner
        pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
        rec[x] = (rec[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) % 256
    return rec


def intrinsics(camera):
    """Pixel focal length and principal point of a Blender camera (camera.json).

    Blender: with sensor_fit AUTO the sensor_width spans the larger image side (HORIZONTAL: the width,
    VERTICAL: sensor_height spans the height); shift_x / shift_y are in units of that side.
    f = lens_mm / sensor_mm * S, with S = W (fit horizontal) or H (fit vertical) in pixels;
    cx = W / 2 - shift_x S, cy = H / 2 + shift_y S (pixel coordinates, origin at the image's top-left corner,
    rows down; pixel (r, c) covers [c, c + 1) x [r, r + 1)). Square pixels are assumed.

    Args:
        camera: the dict of camera.json.

    Returns:
        (f px, cx px, cy px).
    """
    w, h = camera["resolution"]
    fit = camera["sensor_fit"]
    horizontal = fit == "HORIZONTAL" or (fit == "AUTO" and w >= h)
    if horizontal:
        size, sensor = w, camera["sensor_width_mm"]
    else:
        size, sensor = h, camera["sensor_width_mm"] if fit == "AUTO" else camera["sensor_height_mm"]
    f = camera["lens_mm"] / sensor * size
    return f, w / 2 - camera["shift_x"] * size, h / 2 + camera["shift_y"] * size


def project(points, camera):
    """Project world points (Blender world, Z up) to pixel coordinates by the pinhole model.

    p_cam = R^T (p - t) with [R | t] = matrix_world[:3]; the camera looks along -Z_cam with +Y_cam up, so
    u = cx + f x_cam / (-z_cam), v = cy - f y_cam / (-z_cam); depth = -z_cam (> 0 in front).

    Args:
        points: [..., 3] m.
        camera: the dict of camera.json.

    Returns:
        (uv [..., 2] px, depth [...] m).
    """
    m = np.array(camera["matrix_world"], float)
    cam = (np.asarray(points, float) - m[:3, 3]) @ m[:3, :3]
    f, cx, cy = intrinsics(camera)
    depth = -cam[..., 2]
    return np.stack([cx + f * cam[..., 0] / depth, cy - f * cam[..., 1] / depth], -1), depth


def silhouette(uv, faces, width, height):
    """Pixels whose centre lies inside any projected triangle.

    Args:
        uv: [V, 2] px.
        faces: [F, 3] indices.
        width: px.
        height: px.

    Returns:
        bool [height, width].
    """
    out = np.zeros((height, width), bool)
    for tri in uv[faces]:
        lo = np.maximum(np.floor(tri.min(0)).astype(int), 0)
        hi = np.minimum(np.ceil(tri.max(0)).astype(int), [width, height])
        if np.any(hi <= lo):
            continue
        xs, ys = np.meshgrid(np.arange(lo[0], hi[0]) + 0.5, np.arange(lo[1], hi[1]) + 0.5)
        a, b, c = tri
        d = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        if d == 0:
            continue
        l1 = ((xs - a[0]) * (c[1] - a[1]) - (ys - a[1]) * (c[0] - a[0])) / d
        l2 = ((b[0] - a[0]) * (ys - a[1]) - (b[1] - a[1]) * (xs - a[0])) / d
        out[lo[1]:hi[1], lo[0]:hi[0]] |= (l1 >= 0) & (l2 >= 0) & (l1 + l2 <= 1)
    return out


def check_case(folder):
    """Check one case folder; raise AssertionError with the reason if something is wrong.

    Args:
        folder: a case folder (frames/, masks/, background.png, camera.json, case.json, vertices.npy, faces.npy).

    Returns:
        dict: frames, vertices, resolution, min / mean IoU of mask vs projected silhouette, min fraction of the
        projected vertices on the mask, min fraction of vertices inside the image.
    """
    def path(*p):
        return os.path.join(folder, *p)

    for name in ("background.png", "camera.json", "case.json", "vertices.npy", "faces.npy", "frames", "masks"):
        assert os.path.exists(path(name)), f"{folder}: {name} missing"
    camera, case = json.load(open(path("camera.json"))), json.load(open(path("case.json")))
    verts, faces = np.load(path("vertices.npy")), np.load(path("faces.npy"))
    grid = case["grid"]
    nv = (grid["dim_x"] + 1) * (grid["dim_y"] + 1)
    frames = case["frames"]
    assert verts.dtype == np.float32 and verts.shape == (frames, nv, 3), f"vertices.npy {verts.dtype} {verts.shape}"
    assert faces.dtype == np.int32 and faces.shape == (2 * grid["dim_x"] * grid["dim_y"], 3), f"faces {faces.shape}"
    assert faces.min() == 0 and faces.max() == nv - 1
    jj, ii = np.divmod(np.arange(nv), grid["dim_x"] + 1)
    rest = (np.array(grid["origin"]) + ii[:, None] * grid["cell_x"] * np.array(grid["axis_x"])
            + jj[:, None] * grid["cell_y"] * np.array(grid["axis_y"]))
    assert np.abs(verts[0] - rest).max() < 1e-5, "frame 0 is not the grid of case.json (vertex order?)"
    frame_files = sorted(os.listdir(path("frames")))
    mask_files = sorted(os.listdir(path("masks")))
    expected = [f"{k:04d}.png" for k in range(frames)]
    assert frame_files == expected and mask_files == expected, f"{len(frame_files)} frames, {len(mask_files)} masks"
    w, h = camera["resolution"]
    assert read_png(path("background.png")).shape == (h, w, 3), "background.png is not RGB of the camera's size"
    ious, hits, inside = [], [], []
    for k in range(frames):
        assert read_png(path("frames", expected[k])).shape == (h, w, 3), f"frame {k} is not RGB {w}x{h}"
        mask = read_png(path("masks", expected[k]))
        assert mask.shape == (h, w), f"mask {k} is not 8-bit grey {w}x{h}"
        uv, depth = project(verts[k], camera)
        assert depth.min() > camera["clip_start"], f"frame {k}: a vertex behind the camera"
        px = np.floor(uv).astype(int)
        ok = (px[:, 0] >= 0) & (px[:, 0] < w) & (px[:, 1] >= 0) & (px[:, 1] < h)
        inside.append(ok.mean())
        # A vertex on the cloth's edge may sit on a partly covered pixel (3 x 3 max), and a cloth seen edge on is
        # a sliver thinner than a pixel: a vertex counts as on the mask where the cloth covers a pixel next to it
        # at all (swing2's edge-on frame: 0.96 of the vertices, 0.82 with half a pixel asked).
        padded = np.pad(mask, 1)
        near = np.max([padded[1 + dy:h + 1 + dy, 1 + dx:w + 1 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)], 0)
        hits.append((near[px[ok, 1], px[ok, 0]] > 0).mean())
        sil, on = silhouette(uv, faces, w, h), mask > 127
        ious.append((sil & on).sum() / max((sil | on).sum(), 1))
    result = {"frames": frames, "vertices": nv, "resolution": [w, h], "iou_min": float(min(ious)),
              "iou_mean": float(np.mean(ious)), "vertex_on_mask_min": float(min(hits)),
              "vertex_in_image_min": float(min(inside))}
    assert result["vertex_in_image_min"] == 1.0, f"{folder}: the cloth leaves the image {result}"
    assert result["vertex_on_mask_min"] >= MIN_VERTEX_HIT, f"{folder}: mask misses projected vertices {result}"
    assert result["iou_min"] >= MIN_IOU, f"{folder}: mask vs projected silhouette {result}"
    return result


def case_folders(root):
    """The case folders at or under `root` (a folder with case.json, or its sub-folders that have one).

    Args:
        root: a folder.

    Returns:
        list of folders.
    """
    if os.path.exists(os.path.join(root, "case.json")):
        return [root]
    return sorted(os.path.join(root, d) for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "case.json")))


def main(argv):
    """Check every case folder named (or under the folders named); print one line each; 1 if one fails.

    Args:
        argv: folders.

    Returns:
        exit status.
    """
    status = 0
    for root in argv or ["tests/data/blender"]:
        for folder in case_folders(root):
            try:
                print(folder, json.dumps(check_case(folder)))
            except AssertionError as e:
                print(folder, "FAILED:", e)
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
