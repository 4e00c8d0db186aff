"""The shape of a rigid body fitted to a video (`demo rigid-shape`): the Laplacian regularizer, the hull
metrics, and a reduced demo in which a sphere learns the silhouettes of a tumbling cube."""

import json
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.geometry import box_mesh, sphere_mesh
from gradsim_jax.scenes import rigid_shape
from gradsim_jax.sysid.quantities import shape_roughness


def test_shape_roughness_is_zero_for_a_translation_and_matches_a_hand_count():
    verts, faces = sphere_mesh(1.0, 1)
    shift = jnp.broadcast_to(jnp.asarray([0.1, -0.2, 0.3]), verts.shape)
    assert float(shape_roughness(shift, faces)) == pytest.approx(0.0, abs=1e-12)
    # One vertex of a tetrahedron moved by d: it differs from its neighbours' mean by d, each of its
    # three neighbours by -d / 3 (one of three neighbours moved): (1 + 3 / 9) |d|^2 / 4.
    tet = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    bump = jnp.zeros((4, 3)).at[0].set(jnp.asarray([0.0, 0.3, 0.0]))
    assert float(shape_roughness(bump, tet)) == pytest.approx((1 + 3 / 9) * 0.09 / 4, rel=1e-6)
    grad = jax.jit(jax.grad(lambda o: shape_roughness(o, faces)))(jnp.zeros(verts.shape))
    assert np.all(np.isfinite(grad))


def test_smoothness_is_checked_against_the_free_quantities():
    with pytest.raises(ValueError, match="smoothness must be"):
        sysid.check_config(sysid.FitConfig(free=("shape",), smoothness=-1.0))
    with pytest.raises(ValueError, match="shape, which is not free"):
        sysid.check_config(sysid.FitConfig(free=("mass",), smoothness=1.0))
    sysid.check_config(sysid.FitConfig(free=("shape",), smoothness=1.0))


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end run; `make test-all` runs it
def test_hull_error_of_the_cube_itself_is_zero():
    _, model = rigid_shape.experiments(size=24, frames=8)  # the reduced demo's scene: its programs compile once
    half = rigid_shape.HALF_SIDE
    # Project every template vertex radially onto the cube: offsets that make the hull lie on it.
    template = np.asarray(model.params.rigid.vertices, np.float64)
    on_cube = template * (half / np.max(np.abs(template), axis=1, keepdims=True))
    err = rigid_shape.hull_error(model, on_cube - template)
    assert err["mean_vertex_distance_m"] < 1e-6
    # A hull inscribed in the cube, touching it at its vertices only: a little less volume.
    assert 0.8 < err["volume_ratio"] < 1.0
    verts, _ = box_mesh(half, half, half)
    np.testing.assert_allclose(rigid_shape.box_surface_distance(verts * 0.5, (half,) * 3), 0.5 * half)


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_reduced_demo_learns_the_cube(tmp_path):
    args = types.SimpleNamespace(size=24, frames=8, iterations=30, out=str(tmp_path / "out"), seed=0,
                                 smoothness=None, resume=False, resume_anyway=False, checkpoint_every=1000,
                                 no_progress=True, force=False)
    assert rigid_shape.run_demo(args) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    metrics = report["shape_metrics"]
    print(json.dumps(metrics, indent=1))
    initial, fitted = metrics["initial"], metrics["fitted"]
    assert fitted["silhouette_iou"] > initial["silhouette_iou"] + 0.2
    assert fitted["silhouette_iou"] > 0.9
    assert fitted["mean_vertex_distance_m"] < 0.6 * initial["mean_vertex_distance_m"]
    assert abs(fitted["volume_ratio"] - 1.0) < abs(initial["volume_ratio"] - 1.0)
    assert np.shape(report["estimated"]["shape"]) == np.shape(sphere_mesh(1.0, rigid_shape.SUBDIVISIONS)[0])
    for name in ("target.gif", "fitted.gif", "comparison.mp4", "loss.png", "params.png"):
        assert (tmp_path / "out" / name).exists()
