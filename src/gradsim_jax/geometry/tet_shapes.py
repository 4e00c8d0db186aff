"""Generated tetrahedral meshes for FEM soft bodies (no mesher: every one is built here), following the
conventions of `geometry.tets`: every generator returns (vertices float64 [n, 3] m, tets int32 [k, 4]),
all tets positively oriented, the mesh conforming.

* `box_tets`: a grid of cube cells, 5 or 6 tets per cell; `voxel_tets` keeps the cells of a mask (a union
  of boxes, `walker_tets`). The 6-tet (Kuhn) pattern triangulates the whole grid, and the 5-tet pattern
  alternates with the parity of i + j + k, so any subset of cells is conforming.
* `sphere_tets`: a 5-tet box grid on [-1, 1]^3 mapped onto the ball by the smooth cube-to-ball map
  x' = x sqrt(1 - y^2/2 - z^2/2 + y^2 z^2/3) (and cyclically), which sends the cube's surface onto the
  sphere. Tets near the cube's eight corners flatten as `cells` grows (the map's Jacobian vanishes there),
  so keep `cells` <= ~10.
* `extrude_tets`: a simple polygon (convex or not) triangulated by ear clipping, then extruded along y in
  `layers` prisms, each split into 3 tets by the vertex-order rule (the diagonal of every side quad runs
  from its lower-indexed bottom vertex to the higher-indexed top vertex), so neighbouring prisms agree
  (Dompierre et al. 1999, "How to subdivide pyramids, prisms and hexahedra into tetrahedra").
  `cylinder_tets` and `gear_tets` extrude hand-built triangulations (rings; a hub fan plus tooth quads).

Tet-mesh files and the tetrahedralization of closed surfaces: `geometry.tet_files`.
"""

from __future__ import annotations

import itertools

import numpy as np

from gradsim_jax.geometry.tets import check_tets, orient_tets, positive_value


def _cell_tets(corner, parity, pattern):
    """Tets of one cube cell, as `corner(a, b, c)` of its corner bits (a, b, c) in {0, 1}^3."""
    if pattern == 6:  # Freudenthal/Kuhn: one tet per axis order, all along the main diagonal
        out = []
        for order in itertools.permutations(range(3)):
            bits, path = [0, 0, 0], [corner(0, 0, 0)]
            for axis in order:
                bits[axis] = 1
                path.append(corner(*bits))
            out.append(path)
        return out
    # 5 per cell: a central tet on the corners of one parity, four corner tets on the others; alternating
    # the parity between neighbouring cells makes the face diagonals agree (a conforming mesh).
    even = [(0, 0, 0), (1, 1, 0), (1, 0, 1), (0, 1, 1)]
    odd = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)]
    centre, tips = (even, odd) if parity == 0 else (odd, even)
    out = [[corner(*c) for c in centre]]
    for tip in tips:
        near = [c for c in centre if sum(abs(a - b) for a, b in zip(c, tip)) == 1]
        out.append([corner(*tip)] + [corner(*c) for c in near])
    return out


def _check_pattern(fn, pattern):
    if pattern not in (5, 6):
        raise ValueError(f"{fn}: pattern must be 5 or 6 tets per cell, got {pattern!r}")


def _whole(fn, name, value, minimum) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{fn}: {name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _grid_tets(mask, spacing, origin, pattern):
    """Tets of the cells of a boolean grid `mask` [nx, ny, nz] (vertex (i, j, k) at origin + spacing * (i, j,
    k)), vertices not used by a kept cell dropped; the vertices keep the order (i (ny+1) + j) (nz+1) + k."""
    nx, ny, nz = mask.shape
    offset = lambda a, b, c: (a * (ny + 1) + b) * (nz + 1) + c  # noqa: E731
    local = {parity: np.asarray(_cell_tets(offset, parity, pattern)) for parity in (0, 1)}
    cells = np.argwhere(mask)
    base = (cells[:, 0] * (ny + 1) + cells[:, 1]) * (nz + 1) + cells[:, 2]
    parity = cells.sum(axis=1) % 2
    tets = np.where(parity[:, None, None] == 0, local[0], local[1]) + base[:, None, None]
    tets = tets.reshape(-1, 4)
    gi, gj, gk = np.meshgrid(np.arange(nx + 1), np.arange(ny + 1), np.arange(nz + 1), indexing="ij")
    x = np.stack([gi, gj, gk], -1).reshape(-1, 3) * spacing + origin
    used, tets = np.unique(tets, return_inverse=True)
    x = x[used]
    return x, orient_tets(x, tets.reshape(-1, 4))


def box_tets(dims=(1, 1, 1), size=(1.0, 1.0, 1.0), *, pattern: int = 6, origin=(0.0, 0.0, 0.0)):
    """A box of nx x ny x nz cube cells, each split into `pattern` = 5 or 6 tets.

    The box spans origin .. origin + size. Returns (vertices float64 [(nx+1)(ny+1)(nz+1), 3], tets int32
    [pattern nx ny nz, 4]), every tet positive; vertex (i, j, k) is index (i (ny + 1) + j) (nz + 1) + k.

    Args:
        dims: (nx, ny, nz), cells per axis (whole numbers >= 1).
        size: m, the box's extent per axis (three lengths, or one for all).
        pattern: 5 or 6 tets per cell (module docstring).
        origin: [3] m, the box's lower corner.
    """
    _check_pattern("box_tets", pattern)
    try:
        nx, ny, nz = (int(d) for d in dims)
    except (TypeError, ValueError):
        raise ValueError(f"box_tets: dims must be three cell counts, got {dims!r}") from None
    if min(nx, ny, nz) < 1 or any(int(d) != d for d in dims):
        raise ValueError(f"box_tets: dims must be whole numbers >= 1, got {tuple(dims)}")
    size = np.broadcast_to(np.asarray(size, np.float64), (3,))
    if not np.all((size > 0) & np.isfinite(size)):
        raise ValueError(f"box_tets: size must be three finite lengths > 0 (m), got {size.tolist()}")
    return _grid_tets(np.ones((nx, ny, nz), bool), size / [nx, ny, nz], np.asarray(origin, np.float64), pattern)


def voxel_tets(mask, cell_size=1.0, *, pattern: int = 6, origin=(0.0, 0.0, 0.0)):
    """The union of the cube cells where `mask` [nx, ny, nz] is true, each split into `pattern` = 5 or 6 tets.

    Cell (i, j, k) spans origin + cell_size * ([i, i+1] x [j, j+1] x [k, k+1]) (m); `cell_size` one length or
    one per axis. Both patterns are conforming on any set of cells (see the module docstring); vertices of no
    kept cell are dropped. Cells that touch only along an edge or at a corner give a conforming mesh whose
    surface is not a manifold (`check_closed_mesh` refuses it): join such cells by a face.

    Args:
        mask: [nx, ny, nz] bool, the cells to keep (at least one).
        cell_size: m, one length or one per axis.
        pattern: 5 or 6 tets per cell.
        origin: [3] m, the grid's lower corner.
    """
    _check_pattern("voxel_tets", pattern)
    mask = np.asarray(mask)
    if mask.ndim != 3 or mask.dtype != bool:
        raise ValueError(f"voxel_tets: mask must be a 3-D boolean array, got {mask.dtype} {mask.shape}")
    if not mask.any():
        raise ValueError("voxel_tets: mask has no cells")
    spacing = np.broadcast_to(np.asarray(cell_size, np.float64), (3,))
    if not np.all((spacing > 0) & np.isfinite(spacing)):
        raise ValueError(f"voxel_tets: cell_size must be finite lengths > 0 (m), got {spacing.tolist()}")
    return _grid_tets(mask, spacing, np.asarray(origin, np.float64), pattern)


def walker_tets(body=(6, 2, 3), leg=(1, 2, 1), *, legs: int = 4, cell_size: float = 0.1, pattern: int = 6):
    """A soft walker: a body block standing on `legs` (2 or 4) leg blocks, all on one grid (conforming).

    y is up. Four legs stand under the body's four corners; two legs stand under its two x ends, each as deep
    (z) as the body. The feet are at y = 0 and the body is centred on x = z = 0.

    Args:
        body: (x, y, z) whole numbers of cells of the body.
        leg: (x, y, z) whole numbers of cells of each leg (z is ignored with 2 legs: they are as deep as the body).
        legs: 2 or 4.
        cell_size: m, the edge of a cube cell.
        pattern: 5 or 6 tets per cell (`box_tets`).

    Returns:
        (vertices float64 [n, 3] m, tets int32 [k, 4]), as `voxel_tets`.
    """
    bx, by, bz = (_whole("walker_tets", "body", b, 1) for b in body)
    lx, ly, lz = (_whole("walker_tets", "leg", b, 1) for b in leg)
    if legs not in (2, 4):
        raise ValueError(f"walker_tets: legs must be 2 or 4, got {legs!r}")
    lz = bz if legs == 2 else lz
    if 2 * lx > bx or (legs == 4 and 2 * lz > bz):
        raise ValueError(f"walker_tets: legs of {(lx, ly, lz)} cells do not fit apart under a body of "
                         f"{(bx, by, bz)} cells")
    mask = np.zeros((bx, ly + by, bz), bool)
    mask[:, ly:] = True
    for xs in (slice(0, lx), slice(bx - lx, bx)):
        for zs in ((slice(0, lz), slice(bz - lz, bz)) if legs == 4 else (slice(0, bz),)):
            mask[xs, :ly, zs] = True
    h = positive_value("walker_tets", "cell_size", cell_size)
    return voxel_tets(mask, h, pattern=pattern, origin=(-bx * h / 2, 0.0, -bz * h / 2))


def sphere_tets(radius: float = 1.0, cells: int = 4):
    """A ball of `radius` m: a 5-tet box grid of `cells` cells per axis on [-1, 1]^3, mapped onto the ball
    (module docstring); the surface vertices lie on the sphere, so the volume is a little below 4/3 pi r^3
    (0.94 of it at cells = 4, 0.98 at 8). Returns (vertices float64 [(cells+1)^3, 3], tets int32 [5 cells^3, 4]).

    Args:
        radius: m, the ball's radius.
        cells: cells per axis of the box grid (whole number >= 1; keep <= ~10, module docstring).
    """
    r = positive_value("sphere_tets", "radius", radius)
    n = _whole("sphere_tets", "cells", cells, 1)
    x, _ = box_tets((n, n, n), (2.0, 2.0, 2.0), pattern=5, origin=(-1.0, -1.0, -1.0))
    x = np.clip(x, -1.0, 1.0)  # rounding in the grid must not push the square roots' arguments below 0
    sq = x * x
    a, b, c = sq.T
    scale = np.sqrt(np.stack([1 - b / 2 - c / 2 + b * c / 3, 1 - a / 2 - c / 2 + a * c / 3,
                              1 - a / 2 - b / 2 + a * b / 3], axis=1))
    x = r * x * scale
    _, t = box_tets((n, n, n), pattern=5)
    return check_tets(x, orient_tets(x, t), name="sphere_tets")


# ---------------------------------------------------------------------------------------------------------
# Extrusions of 2-D triangulations
# ---------------------------------------------------------------------------------------------------------


def _cross2(o, a, b):
    return (a[..., 0] - o[..., 0]) * (b[..., 1] - o[..., 1]) - (a[..., 1] - o[..., 1]) * (b[..., 0] - o[..., 0])


def _check_simple_polygon(p):
    """ValueError if two non-adjacent edges of the closed polygon p [m, 2] touch or cross."""
    m = len(p)
    a, b = p, np.roll(p, -1, axis=0)
    i, j = np.triu_indices(m, 2)
    keep = (j - i) % m != m - 1  # edges m-1 and 0 share a vertex
    i, j = i[keep], j[keep]
    d1, d2 = _cross2(a[j], b[j], a[i]), _cross2(a[j], b[j], b[i])
    d3, d4 = _cross2(a[i], b[i], a[j]), _cross2(a[i], b[i], b[j])
    scale = np.max(np.abs(p)) ** 2 * 1e-12
    hit = (d1 * d2 <= scale) & (d3 * d4 <= scale)
    # collinear, non-overlapping segments satisfy the sign test: compare their extents on the shared line
    colinear = (np.abs(d1) <= scale) & (np.abs(d2) <= scale)
    if colinear.any():
        lo_i, hi_i = np.minimum(a[i], b[i]), np.maximum(a[i], b[i])
        lo_j, hi_j = np.minimum(a[j], b[j]), np.maximum(a[j], b[j])
        overlap = np.all((lo_i <= hi_j) & (lo_j <= hi_i), axis=1)
        hit &= ~colinear | overlap
    if hit.any():
        k = int(np.argmax(hit))
        raise ValueError(f"extrude_tets: polygon is not simple: edge {i[k]} and edge {j[k]} intersect")


def _ear_clip(polygon):
    """Triangles [m - 2, 3] of a simple counter-clockwise polygon [m, 2] on its own vertices (no Steiner
    points): ear clipping, always cutting the ear with the largest smallest angle, O(m^3)."""
    left = list(range(len(polygon)))
    tris = []
    while len(left) > 3:
        best, best_angle = None, -1.0
        q = polygon[left]
        prev, nxt = np.roll(q, 1, axis=0), np.roll(q, -1, axis=0)
        convex = _cross2(prev, q, nxt) > 1e-12 * np.max(np.abs(polygon)) ** 2
        for k in np.flatnonzero(convex):
            a, b, c = prev[k], q[k], nxt[k]
            others = np.delete(q, [(k - 1) % len(q), k, (k + 1) % len(q)], axis=0)
            inside = (_cross2(a, b, others) >= 0) & (_cross2(b, c, others) >= 0) & (_cross2(c, a, others) >= 0)
            if inside.any():
                continue
            angles = []
            for u, v, w in ((a, b, c), (b, c, a), (c, a, b)):
                e1, e2 = v - u, w - u
                angles.append(np.arccos(np.clip(e1 @ e2 / (np.linalg.norm(e1) * np.linalg.norm(e2)), -1, 1)))
            if min(angles) > best_angle:
                best, best_angle = k, min(angles)
        if best is None:
            raise ValueError("extrude_tets: no ear to cut: the polygon is not simple (or has repeated points)")
        n = len(left)
        tris.append([left[(best - 1) % n], left[best], left[(best + 1) % n]])
        del left[best]
    tris.append(left)
    return np.asarray(tris, np.int64)


def _extrude(points, triangles, height, layers, fn):
    """Prism layers along y (from -height/2 to height/2) over a 2-D triangulation (points [p, 2] -> (x, z)),
    each prism split into 3 tets by the vertex-order rule (module docstring)."""
    h = positive_value(fn, "height", height)
    layers = _whole(fn, "layers", layers, 1)
    p = len(points)
    y = np.linspace(-h / 2, h / 2, layers + 1)
    x = np.concatenate([np.stack([points[:, 0], np.full(p, yl), points[:, 1]], axis=1) for yl in y])
    tri = np.sort(np.asarray(triangles, np.int64), axis=1)
    a, b, c = tri.T
    prism = []
    for layer in range(layers):
        lo, hi = layer * p, (layer + 1) * p
        prism += [np.stack([a + lo, b + lo, c + lo, c + hi], 1), np.stack([a + lo, b + lo, b + hi, c + hi], 1),
                  np.stack([a + lo, a + hi, b + hi, c + hi], 1)]
    t = np.concatenate(prism)
    return check_tets(x, orient_tets(x, t), name=fn)


def extrude_tets(polygon, height: float, layers: int = 1):
    """A prism: the simple polygon `polygon` [m, 2] (m, convex or not, either winding; its 2-D (u, v) become
    (x, z)) extruded along y from -height/2 to height/2 in `layers` layers. The polygon is triangulated by
    ear clipping on its own vertices; every prism splits into 3 tets, conforming (module docstring).
    Returns (vertices float64 [m (layers + 1), 3], tets int32 [3 (m - 2) layers, 4]).

    Args:
        polygon: [m, 2] m, the simple polygon's (u, v) points (m >= 3; a repeated closing point is dropped).
        height: m, the extrusion's length along y.
        layers: the number of prism layers (whole number >= 1).
    """
    poly = np.asarray(polygon, np.float64)
    if poly.ndim != 2 or poly.shape[1] != 2 or len(poly) < 3:
        raise ValueError(f"extrude_tets: polygon must be [m >= 3, 2], got shape {poly.shape}")
    if not np.all(np.isfinite(poly)):
        raise ValueError("extrude_tets: polygon has non-finite points")
    if np.allclose(poly[0], poly[-1]):
        poly = poly[:-1]  # a closed outline listing its first point again
    _check_simple_polygon(poly)
    area2 = np.sum(poly[:, 0] * np.roll(poly[:, 1], -1) - np.roll(poly[:, 0], -1) * poly[:, 1])
    if not abs(area2) > 0:
        raise ValueError("extrude_tets: polygon encloses no area")
    order = np.arange(len(poly)) if area2 > 0 else np.arange(len(poly))[::-1]
    tris = order[_ear_clip(poly[order])]
    return _extrude(poly, tris, height, layers, "extrude_tets")


def _disk(radius, segments, rings):
    """Centre and `rings` rings of `segments` points (the last on the circle), triangles counter-clockwise."""
    phi = 2 * np.pi * np.arange(segments) / segments
    rad = radius * np.arange(1, rings + 1) / rings
    pts = np.concatenate([[[0.0, 0.0]], (rad[:, None, None] * np.stack([np.cos(phi), np.sin(phi)], -1)
                                         ).reshape(-1, 2)])
    j, jn = np.arange(segments), (np.arange(segments) + 1) % segments
    tris = [np.stack([np.zeros(segments, np.int64), 1 + j, 1 + jn], 1)]
    for k in range(rings - 1):
        a, b = 1 + k * segments + j, 1 + k * segments + jn
        c, d = b + segments, a + segments
        tris += [np.stack([a, d, c], 1), np.stack([a, c, b], 1)]
    return pts, np.concatenate(tris)


def cylinder_tets(radius: float, height: float, segments: int = 16, *, rings: int = 2, layers: int = 2):
    """A cylinder of axis y (y from -height/2 to height/2): the regular `segments`-gon inscribed in the circle
    of `radius` m (like `primitives.cylinder_mesh`), meshed as a centre and `rings` rings of `segments` points,
    extruded in `layers` layers. Volume segments/2 r^2 sin(2 pi / segments) height.

    Args:
        radius: m, of the circle the polygon is inscribed in.
        height: m, along y.
        segments: the polygon's number of sides (>= 3).
        rings: rings of `segments` points around the centre (>= 1).
        layers: prism layers along y (>= 1).

    Returns:
        (vertices float64 [n, 3] m, tets int32 [k, 4]).
    """
    r = positive_value("cylinder_tets", "radius", radius)
    segments = _whole("cylinder_tets", "segments", segments, 3)
    rings = _whole("cylinder_tets", "rings", rings, 1)
    pts, tris = _disk(r, segments, rings)
    return _extrude(pts, tris, height, layers, "cylinder_tets")


def gear_outline(teeth: int, r_inner: float, r_outer: float, *, tooth_width: float = 0.5,
                 tip_width: float = 0.5) -> np.ndarray:
    """The gear's outline [4 teeth, 2] m (counter-clockwise): per tooth a root edge on the circle of `r_inner`
    and a trapezoidal tooth to `r_outer`.

    Args:
        teeth: the number of teeth (whole number >= 3).
        r_inner: m, the root circle's radius.
        r_outer: m, the tip circle's radius (> r_inner).
        tooth_width: in (0, 1), the share of each pitch angle (2 pi / teeth) the tooth's base takes.
        tip_width: in (0, 1), the share of the base angle the tooth's tip keeps.
    """
    teeth = _whole("gear_tets", "teeth", teeth, 3)
    ri, ro = positive_value("gear_tets", "r_inner", r_inner), positive_value("gear_tets", "r_outer", r_outer)
    if not ro > ri:
        raise ValueError(f"gear_tets: r_outer ({ro}) must exceed r_inner ({ri})")
    for name, w in (("tooth_width", tooth_width), ("tip_width", tip_width)):
        if not 0 < float(w) < 1:
            raise ValueError(f"gear_tets: {name} must be in (0, 1), got {w!r}")
    pitch = 2 * np.pi / teeth
    base = tooth_width * pitch
    start = pitch * np.arange(teeth)[:, None]
    ang = start + np.array([0.0, base * (1 - tip_width) / 2, base * (1 + tip_width) / 2, base])
    rad = np.array([ri, ro, ro, ri])
    return np.stack([rad * np.cos(ang), rad * np.sin(ang)], -1).reshape(-1, 2)


def gear_tets(teeth: int, r_inner: float, r_outer: float, thickness: float, *, tooth_width: float = 0.5,
              tip_width: float = 0.5, hub_rings: int = 1, layers: int = 1):
    """A spur-gear-like plate of axis y: `gear_outline` (its `teeth` trapezoidal teeth from the root circle
    `r_inner` m to the tip circle `r_outer` m) extruded over `thickness` m in `layers` layers.

    The 2-D mesh: a centre fanned to `hub_rings` rings of 2 teeth points at the root angles (the last being
    the root points), and two triangles per tooth; extruded by the prism rule (module docstring).

    Args:
        teeth: the number of teeth (whole number >= 3).
        r_inner: m, the root circle's radius.
        r_outer: m, the tip circle's radius (> r_inner).
        thickness: m, along y.
        tooth_width: in (0, 1), the share of each pitch angle the tooth's base takes (`gear_outline`).
        tip_width: in (0, 1), the share of the base angle the tooth's tip keeps (`gear_outline`).
        hub_rings: rings of root-angle points between the centre and the root circle (>= 1).
        layers: prism layers along y (>= 1).

    Returns:
        (vertices float64 [n, 3] m, tets int32 [k, 4]).
    """
    outline = gear_outline(teeth, r_inner, r_outer, tooth_width=tooth_width, tip_width=tip_width)
    hub_rings = _whole("gear_tets", "hub_rings", hub_rings, 1)
    ring = outline.reshape(-1, 4, 2)[:, [0, 3]].reshape(-1, 2)  # root points, counter-clockwise
    m = len(ring)
    pts = [np.zeros((1, 2))] + [ring * (k / hub_rings) for k in range(1, hub_rings + 1)]
    tips = outline.reshape(-1, 4, 2)[:, [1, 2]].reshape(-1, 2)
    pts = np.concatenate(pts + [tips])
    j, jn = np.arange(m), (np.arange(m) + 1) % m
    tris = [np.stack([np.zeros(m, np.int64), 1 + j, 1 + jn], 1)]
    for k in range(hub_rings - 1):
        a, b = 1 + k * m + j, 1 + k * m + jn
        tris += [np.stack([a, b + m, b], 1), np.stack([a, a + m, b + m], 1)]
    root = 1 + (hub_rings - 1) * m
    tooth = np.arange(teeth)
    r0, r1 = root + 2 * tooth, root + 2 * tooth + 1
    t0, t1 = 1 + hub_rings * m + 2 * tooth, 1 + hub_rings * m + 2 * tooth + 1
    tris += [np.stack([r0, r1, t1], 1), np.stack([r0, t1, t0], 1)]
    return _extrude(pts, np.concatenate(tris), thickness, layers, "gear_tets")
