"""Locomotion control demos (`gradsim-jax demo control-walker`, `demo control-jellyfish`): a policy of phase
sinusoids learns a gait by gradient descent through simulation and rendering, so that the last rendered frame
matches a target image (gradSim's control_walker and control_jellyfish, Jatavallabhula et al. 2021). Both are
`ControlTask`s (`scenes.control_task`) run by `gradsim_jax.scenes.control.run_demo`, like control-fem.

- `walker_task`: a soft walker (`walker_tets`: a 4 x 1 x 2 block of 5 cm cells on four one-cell legs, 60
  tets) standing on the ground with Coulomb friction (mu 0.8). Six activation groups: each leg, and the front
  and back halves of the body. Nothing is asymmetric in the body: it moves because the policy shifts the
  load between legs out of phase with the body's stretching, so that the loaded feet grip while the
  unloaded ones slide (a hand-made gait of that kind walks either way, depending on its phase:
  `tests/control/test_control_locomotion.py`). The ground's viscous friction is low (kf 2 N s/m): with kf 20
  the feet's lightest particles (5 g) make the gradient through 60 frames overflow. A gait's displacement
  is second order in the activations (its gradient vanishes at a zero policy), so training starts from a
  random policy of scale 1 (`ControlTask.init_scale`). The target image shows the walker `offset` m along +x.
- `jellyfish_task`: a cloth jellyfish, a dome (`jellyfish_bell`: a spherical cap, rings of particles around
  a top vertex, 8 spokes) in water: gravity off (neutrally buoyant) and the aerodynamic drag of the cloth
  component on, which is quadratic in speed (f = k_drag A |n . v| v), so a stroke whose contraction and
  relaxation differ in speed nets thrust (a time-symmetric stroke would not; the policy's 1, 2, 4 Hz
  harmonics make asymmetric ones). Without drag nothing external acts and the centre of mass stays put. The policy drives the rest angles of the bell's bending
  edges (`bend_rest`: one group per ring of hinges, rad), and so folds and unfolds the bell. The target image
  shows the bell `offset` m above its start. Explicit steps: 32 substeps per frame at bend_ke 20 (24 diverge).

The reported metric is `run_demo`'s: the final centre-of-mass distance (m) to the target's, beside the mean
of random policies (`init_policy(key, scale=1)`).
"""

from __future__ import annotations

import numpy as np

from gradsim_jax.control import PhasePolicy, bend_rest, tet_activation
from gradsim_jax.geometry import cloth_mesh, soft_body
from gradsim_jax.geometry.tet_shapes import walker_tets
from gradsim_jax.scenes.control_task import ControlTask, target_image, task_experiment


def walker_groups(vertices, tets, leg_height: float) -> np.ndarray:
    """Activation groups [k] of a `walker_tets` walker: its four legs (tets whose centroid is below
    `leg_height` m) 0..3 by quadrant (x > 0, z > 0 bits), the body's back (x < 0) and front halves 4 and 5.

    Args:
        vertices: [n, 3] m, the walker's vertices.
        tets: [k, 4] int, its tets (vertex indices).
        leg_height: m, the height below which a tet's centroid belongs to a leg.

    Returns:
        [k] int32, the activation group (0..5) of each tet.
    """
    c = np.asarray(vertices)[np.asarray(tets)].mean(1)
    front, right = c[:, 0] > 0, c[:, 2] > 0
    leg = c[:, 1] < leg_height
    return np.where(leg, 2 * front + right, 4 + front).astype(np.int32)


def walker_task(*, size: int = 64, frames: int = 60, substeps: int = 24, frame_dt: float = 1.0 / 30.0,
                offset: float = 0.25, amplitude: float = 0.4, effort: float = 1e-3, cell: float = 0.05,
                mu: float = 0.8, elevation: float = 30.0, state_weight: float = 1.0) -> ControlTask:
    """The control-walker task (module docstring). `offset`: the target's distance along +x (m);
    `amplitude`: the activations' bound; `cell`: the walker's cell size (m); `mu`: ground friction.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        offset: m, the target's distance along +x.
        amplitude: the bound of the policy's activations (`PhasePolicy`).
        cell: m, the walker's cell size.
        mu: the ground's Coulomb friction coefficient (dimensionless).
        effort: weight of the effort term of the loss (`ControlTask`).
        elevation: degrees, the camera's elevation.
        state_weight: weight of the loss's state term (`ControlTask`); 0: none.

    Returns:
        The `ControlTask`.
    """
    x, t = walker_tets(body=(4, 1, 2), leg=(1, 1, 1), legs=4, cell_size=cell, pattern=5)
    x = np.asarray(x, np.float64) + [0.0, 0.002, 0.0]
    body = soft_body(x, t, density=1000.0, k_mu=5.0e3, k_lambda=5.0e3, k_damp=5.0, name="walker")
    topology, params, state0 = body.build(ground=True, contact_ke=1.0e3, contact_kd=1.0, contact_kf=2.0,
                                          contact_mu=mu, particle_radius=0.0)
    actuator = tet_activation(len(t), walker_groups(x, t, cell))
    policy = PhasePolicy(frequencies=(1.0, 2.0, 4.0), amplitude=amplitude)
    x_target = x + [offset, 0.0, 0.0]
    exp = task_experiment("control_walker", topology, params, state0, np.stack([x, x_target]), size=size,
                      frames=frames, substeps=substeps, frame_dt=frame_dt, elevation=elevation, azimuth=20.0)
    return ControlTask("control-walker", exp, policy, actuator, target_image(exp, x_target), x_target.mean(0),
                       effort, f"a soft walker ({len(t)} tets on four legs, 6 activation groups) must walk to "
                       f"the pose {offset} m along +x shown in the target image", amplitude,
                       state_weight=state_weight, init_scale=1.0)


def jellyfish_bell(radius: float = 0.1, rings: int = 3, segments: int = 8, opening: float = 100.0):
    """A bell (umbrella) of cloth: an apex (0, radius, 0) and `rings` rings of `segments` vertices on the
    sphere of `radius` m about the origin, ring j (1..rings) at polar angle j / rings * `opening` degrees
    from +y (opening > 90: the rim curls under the equator). A fan of triangles around the apex, then two
    triangles per quad between rings; every triangle wound counter-clockwise seen from outside (normals
    away from the centre). Returns (vertices float64 [1 + rings segments, 3], triangles int32
    [segments (2 rings - 1), 3]); vertex 1 + j segments + k is ring j + 1, spoke k.

    Args:
        radius: m, the sphere's radius (finite, > 0).
        rings: number of rings (int >= 1).
        segments: vertices per ring, i.e. spokes (int >= 3).
        opening: degrees in (0, 180), the polar angle of the rim (the last ring) from +y.

    Returns:
        (vertices float64 [1 + rings segments, 3] m, triangles int32 [segments (2 rings - 1), 3]).

    Raises:
        ValueError: for a radius, rings, segments or opening out of range.
    """
    radius = float(radius)
    if not (np.isfinite(radius) and radius > 0):
        raise ValueError(f"jellyfish_bell: radius must be a finite length > 0 (m), got {radius!r}")
    for name, value, low in (("rings", rings, 1), ("segments", segments, 3)):
        if not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"jellyfish_bell: {name} must be an int >= {low}, got {value!r}")
    if not 0.0 < float(opening) < 180.0:
        raise ValueError(f"jellyfish_bell: opening must be in (0, 180) degrees, got {opening!r}")
    theta = np.deg2rad(float(opening)) * np.arange(1, rings + 1) / rings
    phi = 2.0 * np.pi * np.arange(segments) / segments
    ring = np.stack([np.outer(np.sin(theta), np.cos(phi)), np.repeat(np.cos(theta)[:, None], segments, 1),
                     np.outer(np.sin(theta), np.sin(phi))], -1).reshape(-1, 3)
    vertices = radius * np.concatenate([[[0.0, 1.0, 0.0]], ring])

    def v(j, k):
        return 1 + j * segments + k % segments

    triangles = [(0, v(0, k + 1), v(0, k)) for k in range(segments)]
    for j in range(rings - 1):
        for k in range(segments):
            triangles += [(v(j, k), v(j, k + 1), v(j + 1, k + 1)), (v(j, k), v(j + 1, k + 1), v(j + 1, k))]
    return vertices, np.asarray(triangles, np.int32)


def bell_hinge_groups(bend_edges, segments: int) -> np.ndarray:
    """Bending groups [e] of a `jellyfish_bell`'s bending edges [e, 4] (o1, o2, a, b): the hinges along ring j
    (both a and b on ring j) are group j, the radial hinges (spokes) -1 (undriven).

    Args:
        bend_edges: [e, 4] int, the bending edges (o1, o2, a, b) as vertex indices of the bell.
        segments: vertices per ring of the bell.

    Returns:
        [e] int32, the group of each bending edge (-1: undriven).
    """
    e = np.asarray(bend_edges)
    ring_a, ring_b = (e[:, 2] - 1) // segments, (e[:, 3] - 1) // segments
    return np.where((ring_a == ring_b) & (e[:, 2] > 0), ring_a, -1).astype(np.int32)


def jellyfish_task(*, size: int = 64, frames: int = 60, substeps: int = 32, frame_dt: float = 1.0 / 30.0,
                   offset: float = 0.1, amplitude: float = 1.0, effort: float = 1e-3, drag: float = 50.0,
                   bend_ke: float = 20.0, elevation: float = 10.0, state_weight: float = 1.0) -> ControlTask:
    """The control-jellyfish task (module docstring). `offset`: the target's height above the start (m);
    `amplitude`: the bound of the rest-angle offsets (rad); `drag`: the triangles' drag coefficient
    (kg/m^3: f = drag A |n . v| v); `bend_ke`: the bending stiffness (N m/rad).

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        offset: m, the target's height above the start.
        amplitude: rad, the bound of the rest-angle offsets.
        drag: kg/m^3, the triangles' drag coefficient (f = drag A |n . v| v).
        bend_ke: N m/rad, the bending stiffness.
        effort: weight of the effort term of the loss (`ControlTask`).
        elevation: degrees, the camera's elevation.
        state_weight: weight of the loss's state term (`ControlTask`); 0: none.

    Returns:
        The `ControlTask`.
    """
    rings, segments = 3, 8
    x, tris = jellyfish_bell(0.1, rings, segments, 100.0)
    cloth = cloth_mesh(x, tris, density=5.0, tri_ke=200.0, tri_ka=200.0, tri_kd=0.05, tri_drag=drag,
                       bend_ke=bend_ke, bend_kd=0.0)
    topology, params, state0 = cloth.build(gravity=(0.0, 0.0, 0.0))
    groups = bell_hinge_groups(cloth.bend_edges, segments)
    actuator = bend_rest(len(groups), groups)
    policy = PhasePolicy(frequencies=(1.0, 2.0, 4.0), amplitude=amplitude)
    x_target = x + [0.0, offset, 0.0]
    exp = task_experiment("control_jellyfish", topology, params, state0, np.stack([x, x_target]), size=size,
                      frames=frames, substeps=substeps, frame_dt=frame_dt, elevation=elevation)
    return ControlTask("control-jellyfish", exp, policy, actuator, target_image(exp, x_target), x_target.mean(0),
                       effort, f"a cloth jellyfish ({len(tris)} triangles, {actuator.outputs} rings of hinges "
                       f"driven) in water (quadratic drag, no gravity) must swim up to {offset} m above its "
                       f"start, shown in the target image", amplitude, state_weight=state_weight,
                       init_scale=1.0)


TASKS = {"control-walker": walker_task, "control-jellyfish": jellyfish_task}

__all__ = ["TASKS", "bell_hinge_groups", "jellyfish_bell", "jellyfish_task", "walker_groups", "walker_task"]
