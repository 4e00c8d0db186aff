"""A mesh's shape from its silhouettes (gradSim's `softras_vertex_optimization` and `dibr_vertex_optimization`):
the renderer alone, no physics.

A `ShapeExperiment` is a template mesh (e.g. an icosphere) seen from fixed cameras, with the cameras held out
of the fit for scoring, the rasterizer's settings (SoftRas or DIB-R, `RenderSettings.coverage`) and the
weights of two regularizers. `fit_shape` finds per-vertex offsets of the template by Adam on

    loss = mean over views of (1 - soft IoU(silhouette, target))
           + laplacian * shape_roughness(offsets)            (mean |o_i - mean of neighbours' o_j|^2, m^2)
           + edge_length * edge_length_spread(vertices)      (variance of the edge lengths, m^2)

(the soft IoU is SoftRas's silhouette loss: sum(a t) / sum(a + t - a t) over the pixels). The Laplacian term
keeps the offsets smooth where the silhouettes do not constrain the surface (concavities, the far side of
a view); the edge term keeps the triangles even, so no face collapses or flips while vertices move.
`silhouette_iou` (hard masks) and `chamfer_distance` (surface samples) score a result against the truth.

The result is a `SysIdResult` (theta {"offsets": [N, 3]}), so `report.write_outputs` writes the videos (the
views as frames), the loss curve and the report of every other demo.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.fit import cosine_schedule, fit
from gradsim_jax.render.rasterize import RenderSettings, silhouette
from gradsim_jax.sysid.builtin import shape_roughness
from gradsim_jax.sysid.config import SysIdResult
from gradsim_jax.sysid.renderer_fits.texture import check_cameras, stack_cameras

Array = Any


def mesh_edges(faces) -> np.ndarray:
    """The undirected edges [E, 2] (each once, lower index first) of a triangle mesh's faces [F, 3].

    Args:
        faces: [F, 3] int, the triangles' vertex indices.

    Returns:
        numpy [E, 2] int, the edges, sorted.
    """
    f = np.asarray(faces)
    return np.unique(np.sort(f[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0)


def edge_length_spread(vertices, edges) -> Array:
    """Variance of the lengths of `edges` [E, 2] of `vertices` [N, 3] (m^2): 0 for a mesh of equal edges,
    whatever its size, so it evens the triangles without shrinking the mesh; traceable.

    Args:
        vertices: [N, 3] m, the mesh's vertices.
        edges: [E, 2] int, vertex index pairs (`mesh_edges`).

    Returns:
        scalar m^2, the variance of the edge lengths.
    """
    d = vertices[edges[:, 0]] - vertices[edges[:, 1]]
    length = jnp.sqrt(jnp.sum(d * d, axis=-1))
    return jnp.mean(jnp.square(length - jnp.mean(length)))


@dataclasses.dataclass(frozen=True, eq=False)
class ShapeExperiment:
    """vertices [N, 3] (the template), faces [F, 3], cameras (the fitted views: `render.camera.Camera`s of
    one image size), held_out (views kept out of the fit, for scoring), settings (`RenderSettings`, its
    `coverage` picks SoftRas or DIB-R), laplacian and edge_length (the regularizers' weights, per m^2),
    name; frame_dt: the seconds each view is shown in the output videos."""

    vertices: np.ndarray
    faces: np.ndarray
    cameras: tuple
    held_out: tuple = ()
    settings: RenderSettings = RenderSettings()
    laplacian: float = 5.0
    edge_length: float = 5.0
    name: str = "shape"
    frame_dt: float = 0.5
    free_particles: Any = None

    def __post_init__(self):
        v = np.asarray(self.vertices, np.float64)
        f = np.asarray(self.faces)
        if v.ndim != 2 or v.shape[1] != 3 or not np.all(np.isfinite(v)):
            raise ValueError(f"ShapeExperiment.vertices must be finite [N, 3], got shape {v.shape}")
        if f.ndim != 2 or f.shape[1] != 3 or f.size == 0 or f.min() < 0 or f.max() >= len(v):
            raise ValueError(f"ShapeExperiment.faces must be [F, 3] indices below {len(v)}")
        check_cameras(self.cameras, self.held_out, "ShapeExperiment", "a shape")
        for name in ("laplacian", "edge_length"):
            w = getattr(self, name)
            if not (np.isfinite(w) and w >= 0):
                raise ValueError(f"ShapeExperiment.{name} must be a finite weight >= 0, got {w}")
        object.__setattr__(self, "cameras", tuple(self.cameras))
        object.__setattr__(self, "held_out", tuple(self.held_out))

    @property
    def size(self) -> tuple:
        return (self.cameras[0].height, self.cameras[0].width)


def render_silhouettes(exp: ShapeExperiment, vertices, cameras=None, faces=None) -> Array:
    """Silhouettes (alpha) [V, H, W] of `vertices` [N, 3] from the cameras, one compiled render mapped over the
    stacked cameras; differentiable in the vertices.

    Args:
        exp: the shape experiment (render settings; default faces and cameras).
        vertices: [N, 3] m, the mesh's vertices.
        cameras: the views (`render.camera.Camera`s of one image size); None: the fitted ones, `exp.cameras`.
        faces: [F, 3] int, the triangles; None: the experiment's.

    Returns:
        [V, H, W] alpha in [0, 1], one silhouette per camera.
    """
    cameras = exp.cameras if cameras is None else tuple(cameras)
    vertices = jnp.asarray(vertices)
    faces = jnp.asarray(exp.faces if faces is None else faces, jnp.int32)
    return jax.lax.map(lambda camera: silhouette(camera, vertices, faces, settings=exp.settings),
                       stack_cameras(cameras))


def check_silhouettes(exp: ShapeExperiment, masks, count: int, name: str = "the target silhouettes") -> np.ndarray:
    """`masks` as float [count, H, W] in [0, 1] (RGBA views [count, H, W, 4] give their alpha), or a
    ValueError naming what is wrong.

    Args:
        exp: the shape experiment (its image size H x W pixels).
        masks: [count, H, W] masks or [count, H, W, 4] RGBA views, values in [0, 1]; every view must show the
            object (a value above 1/2).
        count: the number of views expected.
        name: what the masks are called in the error.

    Returns:
        numpy float32 [count, H, W].
    """
    a = np.asarray(masks, np.float32)
    h, w = exp.size
    if a.ndim == 4 and a.shape[-1] == 4:
        a = a[..., 3]
    if a.shape != (count, h, w):
        raise ValueError(f"{name} must be {count} masks of {h} x {w} pixels [{count}, {h}, {w}] (or RGBA "
                         f"[{count}, {h}, {w}, 4]), got shape {np.shape(masks)}")
    if not np.all(np.isfinite(a)) or a.min() < 0.0 or a.max() > 1.0:
        raise ValueError(f"{name} must hold finite values in [0, 1]")
    if not np.all(a.reshape(count, -1).max(axis=1) > 0.5):
        raise ValueError(f"{name}: a view shows no object (no pixel above 1/2); every view must see it")
    return a


def soft_iou_loss(masks, target) -> Array:
    """Mean over views of 1 - sum(a t) / sum(a + t - a t) of soft masks [V, H, W] (SoftRas's silhouette loss).

    Args:
        masks: [V, H, W] rendered soft masks a, in [0, 1].
        target: [V, H, W] target masks t, in [0, 1].

    Returns:
        scalar loss in [0, 1].
    """
    inter = jnp.sum(masks * target, axis=(-2, -1))
    union = jnp.sum(masks + target - masks * target, axis=(-2, -1))
    return jnp.mean(1.0 - inter / jnp.maximum(union, 1e-12))


def silhouette_iou(masks, target, threshold: float = 0.5) -> np.ndarray:
    """Per-view IoU [V] of the hard silhouettes (value > threshold) of two mask stacks [V, H, W].

    Args:
        masks: [V, H, W] masks.
        target: [V, H, W] masks.
        threshold: the value above which a pixel is covered.

    Returns:
        numpy [V], the IoU of each view in [0, 1].
    """
    a = np.asarray(masks) > threshold
    b = np.asarray(target) > threshold
    inter = np.sum(a & b, axis=(-2, -1))
    return inter / np.maximum(np.sum(a | b, axis=(-2, -1)), 1)


def sample_surface(vertices, faces, count: int, seed: int = 0) -> np.ndarray:
    """`count` points [count, 3] spread uniformly over a triangle mesh's surface (faces picked by area).

    Args:
        vertices: [N, 3] m, the mesh's vertices.
        faces: [F, 3] int, the triangles.
        count: the number of points.
        seed: the random generator's seed.

    Returns:
        numpy [count, 3] m, the points.
    """
    v = np.asarray(vertices, np.float64)
    tri = v[np.asarray(faces)]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    if not area.sum() > 0:
        raise ValueError("sample_surface: the mesh has no area")
    rng = np.random.default_rng(seed)
    which = rng.choice(len(tri), size=count, p=area / area.sum())
    r1, r2 = rng.uniform(size=(2, count))
    s = np.sqrt(r1)
    w = np.stack([1 - s, s * (1 - r2), s * r2], axis=1)
    return np.einsum("pk,pkd->pd", w, tri[which])


def chamfer_distance(points_a, points_b) -> dict:
    """Symmetric chamfer distance of two point sets [Na, 3], [Nb, 3] (m): the mean distance of each point
    to the nearest point of the other set, each way ("a_to_b", "b_to_a"), their mean ("mean") and the
    largest of all ("max"). Nearest points by k-d trees (scipy), exact.

    Args:
        points_a: [Na, 3] m.
        points_b: [Nb, 3] m.

    Returns:
        {"a_to_b", "b_to_a", "mean", "max"}: floats, m.
    """
    from scipy.spatial import cKDTree

    a, b = np.asarray(points_a, np.float64), np.asarray(points_b, np.float64)
    ab = cKDTree(b).query(a)[0]
    ba = cKDTree(a).query(b)[0]
    return {"a_to_b": float(ab.mean()), "b_to_a": float(ba.mean()), "mean": float(0.5 * (ab.mean() + ba.mean())),
            "max": float(max(ab.max(), ba.max()))}


def shape_loss(exp: ShapeExperiment, offsets, target) -> Array:
    """The fit's loss (see the module docstring) of `offsets` [N, 3] against target silhouettes [V, H, W].

    Args:
        exp: the shape experiment (template, faces, cameras, regularizer weights).
        offsets: [N, 3] m, the offset of each template vertex.
        target: [V, H, W] target masks, one per fitted camera.

    Returns:
        scalar loss.
    """
    template = jnp.asarray(exp.vertices, offsets.dtype)
    vertices = template + offsets
    loss = soft_iou_loss(render_silhouettes(exp, vertices), target)
    if exp.laplacian:
        loss = loss + exp.laplacian * shape_roughness(offsets, exp.faces)
    if exp.edge_length:
        loss = loss + exp.edge_length * edge_length_spread(vertices, jnp.asarray(mesh_edges(exp.faces)))
    return loss


def fit_shape(exp: ShapeExperiment, target, *, iterations: int = 300, learning_rate: float = 0.01,
              progress: bool = True) -> SysIdResult:
    """The per-vertex offsets [N, 3] of the template that make its silhouettes from the fitted cameras match
    `target`: Adam on `shape_loss` from zero offsets, the learning rate cosine-decayed to a tenth.

    Args:
        exp: the shape experiment.
        target: [V, H, W] masks or [V, H, W, 4] RGBA views, one per fitted camera.
        iterations: Adam iterations (>= 0).
        learning_rate: the first step size, m per step (> 0).
        progress: print the fit's progress.

    Returns:
        a `SysIdResult` with theta {"offsets": [N, 3] m numpy}.
    """
    target = jnp.asarray(check_silhouettes(exp, target, len(exp.cameras)))
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be positive, got {learning_rate}")
    theta0 = {"offsets": jnp.zeros(np.shape(exp.vertices), jnp.float32)}

    def loss_fn(theta):
        return shape_loss(exp, theta["offsets"], target)

    started = time.perf_counter()
    result = fit(loss_fn, theta0, free=("offsets",), learning_rate=learning_rate, steps=iterations,
                 schedule=cosine_schedule(iterations, 0.1) if iterations else None, progress=progress)
    theta = {"offsets": np.asarray(result.params["offsets"])}
    losses = [float(v) for v in result.history["loss"]]
    history = {"iteration": list(range(len(losses))), "loss": losses, "params": {}, "stage": ["adam"] * len(losses)}
    return SysIdResult(theta=theta, history=history, report=None, wall_time=time.perf_counter() - started,
                       adam_iterations=iterations, lm_iterations=0, loss=float(jax.jit(loss_fn)(theta)))
