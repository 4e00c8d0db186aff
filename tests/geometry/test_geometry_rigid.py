"""Rigid geometry: exact mass properties against closed forms, mesh checks, primitives, files, gradients.

Exactness is tested on polyhedra whose mass properties are known in closed form (box, regular octahedron,
regular N-gon prism) to 1e-10 in float64. Smooth solids (sphere, cylinder) are polyhedra only in the limit,
so for them the test is convergence to the smooth closed form (see each test's docstring for the method).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from gradsim_jax.geometry.rigid import (
    DEFAULT_DENSITY, MassProperties, MeshError, check_closed_mesh, load_mesh, mass_properties,
    rigid_body_from_mesh
)
from gradsim_jax.geometry.primitives import box_mesh, capsule_mesh, cone_mesh, cylinder_mesh, sphere_mesh


# Jitted: one compilation per mesh size is cheaper than dispatching each operation eagerly for a new shape.
_mass_properties = jax.jit(mass_properties)


def props64(vertices, faces, **kw):
    """Mass properties in float64 as numpy (mass, volume, com, inertia).

    Small meshes are padded to 64 vertices and 128 faces so that they share one compilation: the extra
    vertices repeat vertex 0 and the extra faces are [0, 0, 0], whose signed tetrahedra vanish exactly
    (the result does not depend on the reference point the padding moves).
    """
    vertices, faces = np.asarray(vertices, np.float64), np.asarray(faces)
    if len(vertices) <= 64 and len(faces) <= 128:
        vertices = np.concatenate([vertices, np.repeat(vertices[:1], 64 - len(vertices), axis=0)])
        faces = np.concatenate([faces, np.zeros((128 - len(faces), 3), faces.dtype)])
    with jax.enable_x64(True):
        mp = _mass_properties(vertices, faces, **kw)
        return float(mp.mass), float(mp.volume), np.asarray(mp.com), np.asarray(mp.inertia)


def host_volume(vertices, faces):
    """Volume and centre of mass through the host path (closedness and orientation checked, no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        body = rigid_body_from_mesh(vertices, faces, density=1.0)
    return body.mass, body.com


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b))


def box_inertia(m, hx, hy, hz):
    return np.diag([m / 3 * (hy**2 + hz**2), m / 3 * (hx**2 + hz**2), m / 3 * (hx**2 + hy**2)])


# --- exact closed forms on polyhedra -------------------------------------------------------------------------


def test_box_matches_closed_form():
    hx, hy, hz, rho = 0.3, 0.7, 1.9, 750.0
    m, vol, com, inertia = props64(*box_mesh(hx, hy, hz), density=rho)
    assert vol == pytest.approx(8 * hx * hy * hz, rel=1e-12)
    assert m == pytest.approx(rho * 8 * hx * hy * hz, rel=1e-12)
    np.testing.assert_allclose(com, 0.0, atol=1e-14)
    assert rel(inertia, box_inertia(m, hx, hy, hz)) < 1e-10


def test_regular_octahedron_matches_closed_form():
    """|x| + |y| + |z| <= a: V = 4/3 a^3, I = m a^2 / 5 on each axis (integral of x^2 = 2 a^5 / 15)."""
    a = 1.3
    v = a * np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], np.float64)
    faces = np.array([[sx, sy, sz] for sx in (0, 1) for sy in (2, 3) for sz in (4, 5)])
    outward = (faces[:, 0] == 0) ^ (faces[:, 1] == 2) ^ (faces[:, 2] == 4)  # octant sign parity
    faces[~outward] = faces[~outward][:, [0, 2, 1]]
    faces = check_closed_mesh(v, faces)
    m, vol, com, inertia = props64(v, faces, density=1.0)
    assert vol == pytest.approx(4 / 3 * a**3, rel=1e-12)
    assert rel(inertia, np.eye(3) * m * a**2 / 5) < 1e-10


@pytest.mark.parametrize("n", [3, 5, 12])
def test_regular_prism_matches_closed_form(n):
    """Regular n-gon of circumradius R, prism of height h along y (the tessellated cylinder).

    Polygon: area A = n R^2 sin(t) / 2, t = 2 pi / n. A fan triangle (0, a, b) has polar moment
    area (|a|^2 + |b|^2 + a.b) / 6 = area R^2 (2 + cos t) / 6, so the polygon's polar moment is
    J = A R^2 (2 + cos t) / 6, split equally between x and z for n >= 3 (a regular polygon's second-moment
    tensor is isotropic). Prism: Iyy = m R^2 (2 + cos t) / 6, Ixx = Izz = m (R^2 (2 + cos t) + h^2) / 12.
    """
    r, h, rho = 0.8, 2.5, 3.0
    t = 2 * np.pi / n
    m, vol, com, inertia = props64(*cylinder_mesh(r, h, segments=n), density=rho)
    area = n * r**2 * np.sin(t) / 2
    assert vol == pytest.approx(area * h, rel=1e-12)
    np.testing.assert_allclose(com, 0.0, atol=1e-14)
    ixx = m * (r**2 * (2 + np.cos(t)) + h**2) / 12
    assert rel(inertia, np.diag([ixx, m * r**2 * (2 + np.cos(t)) / 6, ixx])) < 1e-10


# --- convergence to smooth closed forms ----------------------------------------------------------------------


def test_cylinder_converges_to_smooth_closed_form():
    """segments = 4096: the inscribed prism's area and Iyy fall short by ~t^2/6 = 3.9e-7 each (t = 2 pi/N),
    so at fixed density its inertia is within 1e-6 of the smooth cylinder's m r^2/2 and m (3 r^2 + h^2)/12."""
    r, h, rho = 0.5, 1.7, 900.0
    m_smooth = rho * np.pi * r**2 * h
    smooth = np.diag([m_smooth * (3 * r**2 + h**2) / 12, m_smooth * r**2 / 2, m_smooth * (3 * r**2 + h**2) / 12])
    m, vol, com, inertia = props64(*cylinder_mesh(r, h, segments=4096), density=rho)
    assert abs(m / m_smooth - 1) < 1e-6
    assert rel(inertia, smooth) < 1e-6


def test_sphere_equals_the_closed_form():
    """`sphere_mesh` (fit="volume") has the ball's volume, so its mass is (4/3) pi rho r^3 and its inertia
    (8/15) pi rho r^5 to 1e-6 directly at 4 subdivisions (5120 faces): a ball minimizes I/m at a fixed
    volume, so the inertia error is second order in the O(h^2) deviation from a sphere, O(h^4)."""
    r, rho = 0.9, 1000.0
    m, vol, com, inertia = props64(*sphere_mesh(r, subdivisions=4), density=rho)
    assert m == pytest.approx(4 / 3 * np.pi * rho * r**3, rel=1e-12)
    np.testing.assert_allclose(com, 0.0, atol=1e-13)
    assert rel(inertia, np.eye(3) * 8 / 15 * np.pi * rho * r**5) < 1e-6
    # translated far away: the same
    v, f = sphere_mesh(r, subdivisions=4)
    m2, _, com2, inertia2 = props64(v + np.array([50.0, -20.0, 7.0]), f, density=rho)
    np.testing.assert_allclose(com2, [50.0, -20.0, 7.0], atol=1e-9)
    assert rel(inertia2, inertia) < 1e-10


def test_inscribed_sphere_converges_at_second_order():
    """With the vertices on the sphere (fit="vertices") the error against (8/15) pi rho r^5 is O(h^2): ~4x
    smaller per subdivision, 2.3e-4 at 6 subdivisions; Richardson extrapolation (4 I_6 - I_5) / 3 reaches
    1e-6."""
    r, rho = 0.9, 1000.0
    closed = 8 / 15 * np.pi * rho * r**5
    errors = {}
    for s in (5, 6):
        _, _, com, inertia = props64(*sphere_mesh(r, subdivisions=s, fit="vertices"), density=rho)
        np.testing.assert_allclose(com, 0.0, atol=1e-13)
        assert rel(inertia, np.eye(3) * inertia[0, 0]) < 1e-12  # icosahedral symmetry: isotropic
        errors[s] = inertia[0, 0] / closed - 1
    assert errors[6] < 0 and abs(errors[6]) < 3e-4
    assert 3.5 < errors[5] / errors[6] < 4.5  # second-order convergence
    assert abs((4 * errors[6] - errors[5]) / 3) < 1e-6


# --- invariances and units -----------------------------------------------------------------------------------


def _rotation(seed):
    q, rr = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    q = q * np.sign(np.diag(rr))
    return q if np.linalg.det(q) > 0 else -q


def test_translation_and_rotation():
    v, f = cone_mesh(0.4, 1.1, segments=24)
    v = v + np.array([0.1, -0.2, 0.05])  # off-centre, so the inertia has off-diagonal terms after rotation
    m0, vol0, com0, inertia0 = props64(v, f, density=500.0)
    rot, shift = _rotation(0), np.array([120.0, -40.0, 7.5])
    m1, vol1, com1, inertia1 = props64(v @ rot.T + shift, f, density=500.0)
    assert m1 == pytest.approx(m0, rel=1e-12) and vol1 == pytest.approx(vol0, rel=1e-12)
    np.testing.assert_allclose(com1, rot @ com0 + shift, rtol=0, atol=1e-10)
    assert rel(inertia1, rot @ inertia0 @ rot.T) < 1e-10


def test_mass_density_consistency_and_scaling():
    v, f = sphere_mesh(0.7, subdivisions=2)
    m, vol, com, inertia = props64(v, f, density=2700.0)
    m2, vol2, com2, inertia2 = props64(v, f, mass=m)
    assert m2 == pytest.approx(m, rel=1e-12) and rel(inertia2, inertia) < 1e-12
    md, _, _, inertia_d = props64(v, f)
    assert md == pytest.approx(DEFAULT_DENSITY * vol, rel=1e-12)
    s = 2.5
    _, vol_s, _, inertia_s = props64(s * v, f, density=2700.0)
    assert vol_s == pytest.approx(s**3 * vol, rel=1e-12)
    assert rel(inertia_s, s**5 * inertia) < 1e-12
    with pytest.raises(ValueError, match="not both"):
        mass_properties(v, f, density=1.0, mass=1.0)


def test_gyration_and_pytree():
    v, f = box_mesh(1.0, 2.0, 3.0)
    mp = jax.jit(mass_properties)(v, f, mass=6.0)
    assert isinstance(mp, MassProperties)
    np.testing.assert_allclose(mp.gyration, box_inertia(1.0, 1.0, 2.0, 3.0), rtol=1e-6)
    leaves = jax.tree_util.tree_leaves(mp)
    assert len(leaves) == 4
    assert mp.inertia.dtype == jnp.float32  # float32 by default, dtype follows the vertices


def test_jit_vmap_and_float32():
    v, f = box_mesh(0.5, 0.5, 0.5)
    fn = jax.jit(lambda verts, mass: mass_properties(verts, f, mass=mass).inertia)
    out = jax.vmap(fn, in_axes=(None, 0))(jnp.asarray(v, jnp.float32), jnp.array([1.0, 2.0], jnp.float32))
    assert out.dtype == jnp.float32 and out.shape == (2, 3, 3)
    np.testing.assert_allclose(out[1], 2 * out[0], rtol=1e-6)
    np.testing.assert_allclose(out[0], box_inertia(1.0, 0.5, 0.5, 0.5), rtol=1e-6)


def test_gradient_matches_finite_differences():
    v, f = sphere_mesh(1.0, subdivisions=1)
    v = v + 0.05 * np.random.default_rng(1).normal(size=v.shape)
    with jax.enable_x64(True):
        x = jnp.asarray(v, jnp.float64)
        def inertia_entries(x):  # by density and by mass, diagonal and off-diagonal, and the centre of mass
            by_density, by_mass = mass_properties(x, f, density=3.0), mass_properties(x, f, mass=2.0)
            return jnp.stack([by_density.inertia[0, 0], by_mass.inertia[1, 2], by_mass.com[0]])

        # jitted: check_grads evaluates the function many times
        check_grads(jax.jit(inertia_entries), (x,), order=1, modes=("rev",))
        g = jax.grad(lambda d: mass_properties(x, f, density=d).inertia[0, 0])(3.0)
        assert float(g) == pytest.approx(float(mass_properties(x, f, density=1.0).inertia[0, 0]), rel=1e-12)


# --- host-side checks ----------------------------------------------------------------------------------------


def test_check_closed_mesh_accepts_primitives():
    for v, f in (box_mesh(1, 2, 3), sphere_mesh(1.0, 2), cylinder_mesh(1, 2, 7), capsule_mesh(1, 0, 5, 2),
                 capsule_mesh(0.3, 1.0, 6, 3), cone_mesh(1, 1, 3)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = check_closed_mesh(v, f)
        np.testing.assert_array_equal(out, f)
        assert out.dtype == np.int32


def test_check_closed_mesh_open():
    v, f = box_mesh(1, 1, 1)
    with pytest.raises(MeshError, match=r"box is open: 3 edge\(s\)"):
        check_closed_mesh(v, f[:-1], name="box")


def test_check_closed_mesh_orientation():
    v, f = box_mesh(1, 1, 1)
    f = f.copy()
    f[4] = f[4, [0, 2, 1]]
    with pytest.raises(MeshError, match="inconsistent orientation.*edge"):
        check_closed_mesh(v, f)


def test_check_closed_mesh_flips_inward_mesh():
    v, f = box_mesh(1, 2, 3)
    with pytest.warns(UserWarning, match="inward"):
        fixed = check_closed_mesh(v, f[:, ::-1])
    assert props64(v, fixed, density=1.0)[1] == pytest.approx(48.0, rel=1e-12)


def test_check_closed_mesh_refusals():
    v, f = box_mesh(1, 1, 1)
    bad = f.copy()
    bad[3, 1] = 8
    with pytest.raises(MeshError, match=r"faces\[3\].*out of range \[0, 8\)"):
        check_closed_mesh(v, bad)
    bad[3, 1] = -1
    with pytest.raises(MeshError, match="out of range"):
        check_closed_mesh(v, bad)
    with pytest.raises(MeshError, match="repeats a vertex"):
        check_closed_mesh(v, np.concatenate([f, [[0, 0, 1]]]))
    collinear = np.concatenate([v, [(v[0] + v[1]) / 2]])
    with pytest.raises(MeshError, match="zero area"):
        check_closed_mesh(collinear, np.concatenate([f, [[0, 8, 1]]]))
    nan = v.copy()
    nan[5, 2] = np.nan
    with pytest.raises(MeshError, match="vertex 5"):
        check_closed_mesh(nan, f)
    with pytest.raises(MeshError, match="non-manifold"):
        check_closed_mesh(v, np.concatenate([f, f[:1]]))
    with pytest.raises(MeshError, match="no volume"):
        check_closed_mesh(v, np.array([[0, 1, 3], [0, 3, 1]]))
    with pytest.raises(MeshError, match="integer"):
        check_closed_mesh(v, f.astype(float))
    with pytest.raises(MeshError, match="shape"):
        check_closed_mesh(v[:, :2], f)


def test_check_closed_mesh_accepts_hollow_solid():
    outer_v, outer_f = sphere_mesh(1.0, 1)
    inner_v, inner_f = sphere_mesh(0.5, 1)
    v = np.concatenate([outer_v, inner_v])
    f = np.concatenate([outer_f, inner_f[:, ::-1] + len(outer_v)])
    out = check_closed_mesh(v, f)
    _, vol, _, _ = props64(v, out, density=1.0)
    assert vol == pytest.approx(props64(outer_v, outer_f)[1] - props64(inner_v, inner_f)[1], rel=1e-12)


def test_check_closed_mesh_is_vectorized():
    v, f = sphere_mesh(1.0, 6)  # 81920 faces
    assert check_closed_mesh(v, f).shape == f.shape


# --- primitives ----------------------------------------------------------------------------------------------


def test_primitive_volumes():
    """Through the float64 host path (`rigid_body_from_mesh`, which also checks closedness and outward
    orientation): exact where the polyhedron has a closed form (N-gon prism, pyramid), within the
    tessellation error (inscribed, so slightly below) for the capsule and the smooth cone."""
    n, r, h = 64, 0.3, 0.9
    area = n * r**2 * np.sin(2 * np.pi / n) / 2
    assert host_volume(*cylinder_mesh(r, h, n))[0] == pytest.approx(area * h, rel=1e-12)
    vol, com = host_volume(*cone_mesh(r, h, n))
    assert vol == pytest.approx(area * h / 3, rel=1e-12)
    np.testing.assert_allclose(com, 0.0, atol=1e-14)
    v, _ = cone_mesh(r, h, n)
    assert v[:, 1].max() == pytest.approx(0.75 * h) and v[:, 1].min() == pytest.approx(-0.25 * h)
    smooth = np.pi * r**2 * h + 4 / 3 * np.pi * r**3
    vol, com = host_volume(*capsule_mesh(r, h, segments=256, rings=64))
    assert 0 < smooth - vol < 1e-3 * smooth
    np.testing.assert_allclose(com, 0.0, atol=1e-14)
    assert 0 < np.pi * r**2 * h / 3 - host_volume(*cone_mesh(r, h, 256))[0] < 1e-3 * np.pi * r**2 * h / 3
    sphere = 4 / 3 * np.pi * r**3
    assert 0 < sphere - host_volume(*capsule_mesh(r, 0.0, segments=128, rings=32))[0] < 2e-3 * sphere
    assert 0 < sphere - host_volume(*sphere_mesh(r, 4, fit="vertices"))[0] < 3e-3 * sphere
    v, f = capsule_mesh(r, 0.0, segments=16, rings=4)
    assert np.allclose(np.linalg.norm(v, axis=1), r)
    assert (v.shape[0], f.shape[0]) == (2 + 7 * 16, 2 * 16 * 7)
    v, f = sphere_mesh(2.0, 2, fit="vertices")
    assert (v.shape[0], f.shape[0]) == (162, 320) and np.allclose(np.linalg.norm(v, axis=1), 2.0)
    assert host_volume(*sphere_mesh(r, 2))[0] == pytest.approx(sphere, rel=1e-12)  # fit="volume"
    assert v.dtype == np.float64 and f.dtype == np.int32


@pytest.mark.parametrize("call, match", [
    (lambda: box_mesh(1, 0, 1), "hy must be positive"),
    (lambda: box_mesh(1, float("inf"), 1), "hy must be positive"),
    (lambda: sphere_mesh(-1.0), "radius must be positive"),
    (lambda: sphere_mesh(1.0, 2.5), "subdivisions must be an integer"),
    (lambda: sphere_mesh(1.0, 12), r"subdivisions must be in \[0, 9\]"),
    (lambda: cylinder_mesh(1, 1, segments=2), "segments must be in"),
    (lambda: cylinder_mesh(1, "2"), "height must be a real number"),
    (lambda: capsule_mesh(1, -1), "height must be a finite number >= 0"),
    (lambda: capsule_mesh(1, 1, rings=0), "rings must be in"),
    (lambda: cone_mesh(1, 1, segments=True), "segments must be an integer"),
])
def test_primitive_argument_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- files and the host-side rigid body ----------------------------------------------------------------------


def test_load_mesh_round_trips(tmp_path):
    import trimesh

    v, f = box_mesh(0.2, 0.4, 0.6)
    expected = props64(v, f, density=1.0)
    obj = tmp_path / "box.obj"
    obj.write_text("".join(f"v {x:.17g} {y:.17g} {z:.17g}\n" for x, y, z in v) + "".join(
        f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in f))
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "box.stl")  # binary STL: a triangle soup
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "box.ply")
    assert (tmp_path / "box.stl").read_bytes()[:5] != b"solid"
    for name in ("box.obj", "box.stl", "box.ply"):
        lv, lf = load_mesh(tmp_path / name)
        assert lv.dtype == np.float64 and lf.dtype == np.int32 and lv.shape == (8, 3)
        lf = check_closed_mesh(lv, lf, name=name)
        got = props64(lv, lf, density=1.0)
        assert got[0] == pytest.approx(expected[0], rel=1e-6)
        np.testing.assert_allclose(got[2], expected[2], atol=1e-6)
        assert rel(got[3], expected[3]) < 1e-6  # STL stores float32


def test_load_mesh_errors(tmp_path):
    with pytest.raises(MeshError, match="no such mesh file"):
        load_mesh(tmp_path / "missing.obj")
    (tmp_path / "points.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    with pytest.raises(MeshError, match="no triangle faces"):
        load_mesh(tmp_path / "points.obj")
    (tmp_path / "junk.xyz1").write_bytes(b"\x00\x01not a mesh")
    with pytest.raises(MeshError, match="cannot read"):
        load_mesh(tmp_path / "junk.xyz1")


def test_rigid_body_from_mesh():
    v, f = box_mesh(0.1, 0.2, 0.3)
    shift = np.array([1.0, 2.0, -3.0])
    with pytest.warns(UserWarning, match="inward"):
        body = rigid_body_from_mesh(v + shift, np.ascontiguousarray(f[:, ::-1]), mass=4.0)
    assert body.mass == 4.0
    np.testing.assert_allclose(body.com, shift, atol=1e-14)
    np.testing.assert_allclose(body.vertices_body, v, atol=1e-14)
    np.testing.assert_allclose(body.gyration, box_inertia(1.0, 0.1, 0.2, 0.3), rtol=1e-12, atol=1e-16)
    assert props64(body.vertices_body, body.faces)[1] > 0
    dense = rigid_body_from_mesh(v, f, density=100.0)
    assert dense.mass == pytest.approx(100.0 * 0.048, rel=1e-12)
    assert rigid_body_from_mesh(v, f).mass == pytest.approx(DEFAULT_DENSITY * 0.048, rel=1e-12)
    with pytest.raises(ValueError, match="not both"):
        rigid_body_from_mesh(v, f, density=1.0, mass=1.0)
    with pytest.raises(ValueError, match="mass must be positive"):
        rigid_body_from_mesh(v, f, mass=-1.0)
    with pytest.raises(MeshError, match="open"):
        rigid_body_from_mesh(v, f[1:])
