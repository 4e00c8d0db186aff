"""Property: meshes and host-side builders take any input without a raw traceback.

- OBJ files (a scene file's `mesh`): junk lines, faces with zero, negative or out-of-range indices,
  non-numeric or missing coordinates, NaN and huge values, degenerate triangles, empty files, bytes that
  are not text. Reading and building either succeeds with a finite scene or stops with a
  `SceneFileError` naming the OBJ file (and its line, for a line that cannot be read).
- Arrays into `gs.cloth_mesh`, `gs.cloth_grid`, `gs.particles` and `Scene.build`: any shape, dtype or
  value. They build a valid scene or raise ValueError/TypeError naming the argument or the container
  field (`faces[3]`, `Params.particles.mass[0]`, ...), never numpy's reshape or broadcast messages.
"""

import math
import re
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradsim_jax as gs
from gradsim_jax.scenefile import SceneFileError, load_scene, read_obj

from bounded import bounded

SCENE = """
[scene]
mesh = "m.obj"
pos = [-0.1, 0.0, -0.1]

[simulation]
frames = 1
substeps = 2

[render]
width = 8
height = 8

[fit]
free = ["mass"]
"""
GOOD_OBJ = ["v 0 0 0", "v 0.2 0 0", "v 0 0 0.2", "v 0.2 0 0.2", "f 1 2 3", "f 2 4 3"]

# ---------------------------------------------------------------------------------------------------
# OBJ files

NUMBERS = st.one_of(st.floats(-1.0, 1.0).map(repr), st.integers(-3, 3).map(str),
                    st.sampled_from(["nan", "inf", "-inf", "1e400", "-0", "0x10", "1,5", "abc", "", "1e-400"]))
INDICES = st.one_of(st.integers(-6, 8).map(str), st.sampled_from(["2**40", "99999999999", "1.5", "x", "-0"]),
                    st.tuples(st.integers(-2, 6).map(str), st.sampled_from(["/", "//", "/1/", "/x"])).map("".join))
OBJ_LINES = st.one_of(
    st.lists(NUMBERS, min_size=0, max_size=5).map(lambda c: " ".join(["v", *c])),
    st.lists(INDICES, min_size=0, max_size=5).map(lambda c: " ".join(["f", *c])),
    st.sampled_from(["", "   ", "# comment", "vt 0.5 0.5", "vn 0 1 0", "o cloth", "g group", "s off", "l 1 2",
                     "usemtl red", "mtllib x.mtl", "p 1", "f", "v", "\t v 0 0 0", "V 1 2 3", "F 1 2 3"]),
    st.text(max_size=12),
)


@st.composite
def obj_texts(draw):
    """A valid 2-triangle mesh with random lines inserted, replaced or removed (or none of it)."""
    lines = list(GOOD_OBJ) if draw(st.booleans()) else []
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 4]))):
        where = draw(st.integers(0, len(lines)))
        kind = draw(st.sampled_from(["insert", "insert", "replace", "delete"]))
        if kind == "insert" or not lines:
            lines.insert(where, draw(OBJ_LINES))
        elif kind == "replace":
            lines[min(where, len(lines) - 1)] = draw(OBJ_LINES)
        else:
            del lines[min(where, len(lines) - 1)]
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))


def mesh_folder(obj: str | bytes):
    folder = tempfile.TemporaryDirectory()
    root = Path(folder.name)
    mesh = root / "m.obj"
    mesh.write_bytes(obj if isinstance(obj, bytes) else obj.encode("utf-8", "surrogatepass"))
    (root / "scene.toml").write_text(SCENE)
    return folder, root / "scene.toml", mesh


def check_obj(obj):
    """read_obj returns finite vertices [n, 3] and in-range triangles [t, 3], or a SceneFileError naming
    the OBJ file (with a line number for a line it cannot read); the scene then builds or says why."""
    folder, scene, mesh = mesh_folder(obj)
    with folder:
        try:
            vertices, faces = read_obj(mesh)
        except SceneFileError as e:
            event("OBJ refused")
            assert str(mesh) in str(e), str(e)
            if "line" in str(e):
                assert re.search(re.escape(str(mesh)) + r":\d+:", str(e)), str(e)
            return
        assert vertices.ndim == 2 and vertices.shape[1] == 3 and np.all(np.isfinite(vertices))
        assert faces.ndim == 2 and faces.shape[1] == 3 and faces.shape[0] >= 1
        assert faces.min() >= 0 and faces.max() < vertices.shape[0]
        try:
            exp = load_scene(scene).experiment()
        except SceneFileError as e:
            event("scene refused")
            assert str(scene) in str(e) and "[scene]" in str(e), str(e)
            return
        assert np.all(np.isfinite(np.asarray(exp.state0.particles.x)))
        event("built")


@bounded(200)
@given(obj=obj_texts())
def test_any_obj_file_reads_or_names_the_file_and_line(obj):
    check_obj(obj)


@bounded(25)
@given(obj=st.one_of(st.binary(max_size=64), st.binary(max_size=16).map(lambda b: "\n".join(GOOD_OBJ).encode() + b)))
def test_obj_bytes_that_are_not_text_are_refused_by_name(obj):
    check_obj(obj)


# ---------------------------------------------------------------------------------------------------
# Builders

#: Words an error from a builder may name: its arguments, and the containers' fields.
NAMES = ("vertices", "faces", "pinned", "density", "vel", "tri_ke", "tri_ka", "tri_kd", "tri_drag", "tri_lift",
         "bend_ke", "bend_kd", "dim_x", "dim_y", "cell_x", "cell_y", "pos", "rot", "mass", "gravity",
         "Params", "State", "Topology")
FLOAT_ELEMENTS = st.one_of(st.floats(-1.0, 1.0), st.sampled_from([0.0, math.nan, math.inf, -math.inf, 1e300]))
DTYPES = st.sampled_from([np.float64, np.float32, np.float16, np.int32, np.int64, np.bool_, np.complex64])


def arrays(shape_sizes=5, elements=FLOAT_ELEMENTS):
    """Arrays of any rank 0 to 3, any of DTYPES, values from `elements` (cast to the dtype)."""
    def build(dtype):
        if dtype in (np.float64, np.float32, np.float16, np.complex64):
            values = elements
        elif dtype == np.bool_:
            values = st.booleans()
        else:
            values = st.integers(-3, 8)
        return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=shape_sizes),
                          elements=values)
    return DTYPES.flatmap(build)


VERTICES = st.one_of(
    st.just(np.array([[0, 0, 0], [0.2, 0, 0], [0, 0, 0.2], [0.2, 0, 0.2]])),
    hnp.arrays(np.float64, st.tuples(st.integers(0, 6), st.just(3)), elements=FLOAT_ELEMENTS),
    arrays(),
    st.lists(st.floats(-1, 1), max_size=7),
)
FACES = st.one_of(
    st.just(np.array([[0, 1, 2], [1, 3, 2]])),
    hnp.arrays(np.int64, st.tuples(st.integers(0, 4), st.just(3)),
               elements=st.one_of(st.integers(-2, 6), st.sampled_from([2**31, 2**40, -(2**40)]))),
    arrays(elements=st.one_of(st.floats(-1, 5), st.sampled_from([math.nan, 1.5, 2.0]))),
    st.lists(st.integers(-1, 5), max_size=7),
)
SCALARS = st.one_of(st.floats(0.0, 10.0), st.sampled_from([0.0, -1.0, math.nan, math.inf, 1e300]))
PINNED = st.one_of(st.none(), st.lists(st.booleans(), max_size=6).map(np.asarray),
                   st.lists(st.integers(-6, 6), max_size=3), st.lists(st.floats(-1, 5), max_size=2))


def check_builder_error(error):
    message = str(error)
    assert re.search(r"\b(" + "|".join(NAMES) + r")\b", message), f"{type(error).__name__}: {message}"
    for raw in ("could not be broadcast", "cannot reshape", "inhomogeneous", "out of bounds for int32",
                "setting an array element"):
        assert raw not in message, message


def build_checked(scene, **kwargs):
    """Scene.build: a finite, in-range scene or a ValueError/TypeError naming what is wrong."""
    try:
        topology, params, state = scene.build(**kwargs)
    except (ValueError, TypeError) as e:
        event("build refused")
        check_builder_error(e)
        return
    event("built")
    n = topology.particles.pinned.shape[0]
    assert np.all(np.isfinite(np.asarray(state.particles.x))) and np.all(np.isfinite(np.asarray(params.particles.mass)))
    tris = np.asarray(topology.cloth.triangles)
    assert tris.size == 0 or (tris.min() >= 0 and tris.max() < n)


@bounded(120)
@given(vertices=VERTICES, faces=FACES, pinned=PINNED, density=SCALARS, tri_ke=SCALARS, bend_ke=SCALARS,
       vel=st.one_of(st.just((0.0, 0.0, 0.0)), arrays(shape_sizes=4)))
def test_cloth_mesh_builds_or_names_the_argument(vertices, faces, pinned, density, tri_ke, bend_ke, vel):
    try:
        scene = gs.cloth_mesh(vertices, faces, pinned=pinned, density=density, tri_ke=tri_ke, bend_ke=bend_ke,
                              vel=vel)
    except (ValueError, TypeError) as e:
        check_builder_error(e)
        return
    build_checked(scene)


DIMS = st.one_of(st.integers(-1, 3), st.sampled_from([1.5, math.nan, True, "2", 2**31, 2**62]))


@bounded(100)
@given(dim_x=DIMS, dim_y=DIMS, cell=st.tuples(SCALARS, SCALARS),
       pos=st.one_of(st.just((0.0, 0.0, 0.0)), arrays(shape_sizes=4)),
       rot=st.one_of(st.just((1.0, 0.0, 0.0, 0.0)), st.lists(st.sampled_from([0.0, 1.0, math.nan, 1e300]),
                                                               min_size=0, max_size=5)),
       mass=st.one_of(SCALARS, arrays(shape_sizes=4)), fix_left=st.booleans(),
       gravity=st.one_of(st.just((0.0, -9.81, 0.0)), arrays(shape_sizes=4)),
       contact_ke=SCALARS, particle_radius=SCALARS, ground=st.booleans())
def test_cloth_grid_builds_or_names_the_argument(dim_x, dim_y, cell, pos, rot, mass, fix_left, gravity,
                                                 contact_ke, particle_radius, ground):
    try:
        scene = gs.cloth_grid(dim_x, dim_y, cell[0], cell[1], pos=pos, rot=rot, mass=mass, fix_left=fix_left)
    except (ValueError, TypeError) as e:
        check_builder_error(e)
        return
    build_checked(scene, gravity=gravity, contact_ke=contact_ke, particle_radius=particle_radius, ground=ground)
