"""Host-side scene builders."""

import numpy as np
import pytest

import gradsim_jax as gs


@pytest.mark.parametrize("dx,dy", [(1, 1), (4, 3), (20, 10)])
def test_cloth_grid_counts(dx, dy):
    s = gs.cloth_grid(dx, dy, 0.1, 0.2)
    assert s.num_particles == (dx + 1) * (dy + 1)
    assert s.triangles.shape == (2 * dx * dy, 3)
    # Each interior edge is shared by two triangles: 3 dx dy edges in all, 2 (dx + dy) on the boundary.
    assert s.bend_edges.shape == (3 * dx * dy - dx - dy, 4)
    assert np.allclose(s.x[dx + 1], [0.0, 0.2, 0.0]) and np.allclose(s.x[1], [0.1, 0.0, 0.0])


def test_cloth_grid_fix_flags_and_rotation():
    s = gs.cloth_grid(3, 2, 0.1, 0.1, fix_left=True, fix_top=True,
                      rot=gs.quat_from_axis_angle((1, 0, 0), np.pi / 2))
    pinned = s.pinned.reshape(3, 4)
    assert pinned[:, 0].all() and pinned[2].all() and pinned.sum() == 3 + 4 - 1
    np.testing.assert_allclose(s.x[4], [0.0, 0.0, 0.1], atol=1e-12)  # y rotated onto z


def test_cloth_mesh_lumped_mass_and_bending():
    x = [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]]
    s = gs.cloth_mesh(x, [[0, 1, 2], [0, 2, 3]], density=0.3, pinned=[3])
    np.testing.assert_allclose(s.mass.sum(), 0.3 * 1.0)
    np.testing.assert_allclose(s.mass, [0.1, 0.05, 0.1, 0.05])
    assert s.bend_edges.tolist() == [[1, 3, 2, 0]]  # edge 2 -> 0 in the winding of (0, 1, 2)
    assert s.pinned.tolist() == [False, False, False, True]
    np.testing.assert_allclose(s.bend_rest, 0.0, atol=1e-12)


def test_combine_offsets_indices_and_springs_connect_pieces():
    a = gs.cloth_grid(1, 1, 0.1, 0.1)
    b = gs.particles([[0, 1, 0], [1, 1, 0]], mass=0.0)
    s = (a + b).add_springs([[4, 0], [5, 1]], ke=10.0, kd=1.0)
    assert s.num_particles == 6 and s.pinned.tolist() == [False] * 4 + [True, True]
    c = gs.combine(b, a)
    np.testing.assert_array_equal(c.triangles, a.triangles + 2)
    np.testing.assert_allclose(s.spring_rest, [1.0, np.sqrt(0.9**2 + 1.0)])
    top, par, st = s.build(gravity=(0, -1, 0), damping=0.1)
    assert top.springs.pairs.shape == (2, 2) and par.springs.ke.tolist() == [10.0, 10.0]
    assert float(par.particles.damping) == pytest.approx(0.1) and not top.cloth.aerodynamics


def test_bending_rest_angle_of_a_folded_mesh():
    x = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    s = gs.cloth_mesh(x, [[0, 1, 2], [0, 3, 1]])
    assert s.bend_edges.shape == (1, 4)
    np.testing.assert_allclose(abs(s.bend_rest[0]), np.pi / 2, rtol=1e-12)


def test_builders_refuse_complex_values():
    """A complex array cast to float64 would silently lose its imaginary part."""
    with pytest.raises(ValueError, match="mass must be real numbers, got complex"):
        gs.particles(np.zeros((2, 3)), mass=np.array([1.0 + 2.0j, 1.0]))
