"""Property: parameter pytrees with any value, dtype or shape go into `gs.simulate` and `gs.render` (and their
checked, jitted variants) and come out as a finite result, a `SimulationDiverged` naming the frame, or a
ValueError/TypeError naming the field (and, for a bad value, its index): never a raw error from JAX or
numpy, and never a NaN that nobody reported.

The scene is a 1 x 1 cloth with one spring and one bending edge (so every Params field has entries),
simulated for 1 frame of 2 substeps; images are 8 x 8.
"""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

import gradsim_jax as gs
from gradsim_jax.physics.checks import TracedCheckError, checked_simulate, raise_if_error
from gradsim_jax.physics import get_path, replace_paths
from gradsim_jax.physics.validate import NONNEGATIVE, PARAM_SHAPES
from gradsim_jax.render import FaceColors, VertexColors
from gradsim_jax.render.checks import checked_render

from bounded import bounded

SCENE = gs.cloth_grid(1, 1, 0.2, 0.2, pos=(0.0, 0.5, 0.0), fix_left=True, mass=0.01, bend_ke=1.0,
                      bend_kd=0.1).add_springs([[1, 2]], ke=10.0, kd=0.1)
TOPOLOGY, PARAMS, STATE = SCENE.build(ground=True, ground_height=-1.0)
CAMERA = gs.look_at_camera(1.0, 20.0, 0.0, at=(0.1, 0.6, 0.0), width=8, height=8)
RUN = dict(frames=1, substeps=2)
FIELDS = [("Params", name) for name in PARAM_SHAPES if np.size(get_path(PARAMS, name))]  # this scene has no tets
FIELDS += [("State", "particles.x"), ("State", "particles.v")]
BAD_VALUES = [math.nan, math.inf, -math.inf, -1.0, -1e-6, 1e30, 0.0, 3.0e38]


def containers_with(container: str, field: str, value):
    params, state = PARAMS, STATE
    if container == "Params":
        params = replace_paths(params, {field: value})
    else:
        state = replace_paths(state, {field: value})
    return params, state


def is_bad(container: str, field: str, value: float) -> bool:
    """Whether the value is one the checks must report (non-finite, or negative where only >= 0 makes sense)."""
    return not math.isfinite(value) or (container == "Params" and field in NONNEGATIVE and value < 0)


def index_text(index) -> str:
    """How messages write an index: "[1, 2]"; nothing for a scalar field."""
    return "[" + ", ".join(str(int(i)) for i in index) + "]" if index else ""


@st.composite
def one_bad_value(draw):
    """(container, field, index, value, params, state): one entry of one field replaced."""
    container, field = draw(st.sampled_from(FIELDS))
    array = np.array(get_path(PARAMS if container == "Params" else STATE, field))
    index = tuple(draw(st.integers(0, n - 1)) for n in array.shape)
    value = draw(st.sampled_from(BAD_VALUES))
    array[index] = value
    return (container, field, index, value, *containers_with(container, field, jnp.asarray(array)))


def check_trajectory(trajectory):
    """Finite, or a SimulationDiverged naming the frame and particle (a legal but unstable value)."""
    try:
        gs.check_finite(trajectory)
    except gs.SimulationDiverged as e:
        event("diverged")
        assert "frame" in str(e) and "particle" in str(e)
        return
    event("finite")


@bounded(40)
@given(case=one_bad_value())
def test_simulate_reports_a_bad_value_by_field_and_index(case):
    container, field, index, value, params, state = case
    try:
        trajectory = gs.simulate(TOPOLOGY, params, state, **RUN)
    except ValueError as e:
        event("refused")
        # A bad value is named with its index; a finite one may still be refused, by field, by a check of
        # what it does (a zero ground normal, a sliver of a rest triangle).
        named = f"{container}.{field}{index_text(index)}" if is_bad(container, field, value) else f"{container}.{field}"
        assert named in str(e), (named, str(e))
        return
    assert not is_bad(container, field, value), f"{container}.{field}{list(index)} = {value} was accepted"
    check_trajectory(trajectory)


CHECKED = jax.jit(checked_simulate, static_argnames=("frames", "substeps"))


@bounded(40)
@given(case=one_bad_value())
def test_checked_simulate_names_a_traced_bad_value(case):
    """Inside jit the values are tracers: checked_simulate's checks must name the same field and index."""
    container, field, index, value, params, state = case
    err, trajectory = CHECKED(TOPOLOGY, params, state, **RUN)
    try:
        raise_if_error(err)
    except TracedCheckError as e:
        message = str(e)
        if message.startswith("simulation diverged"):
            event("diverged")
            assert not is_bad(container, field, value), message
            return
        event("refused")
        named = f"{container}.{field}{index_text(index)}" if is_bad(container, field, value) else f"{container}.{field}"
        assert named in message, (named, message)
        return
    assert not is_bad(container, field, value), f"{container}.{field}{list(index)} = {value} was not reported"
    assert np.all(np.isfinite(np.asarray(trajectory.particles.x))) and np.all(np.isfinite(np.asarray(trajectory.particles.v)))
    event("finite")


DTYPES = [np.int32, np.bool_, np.complex64, np.float16, np.uint8]


@st.composite
def one_odd_leaf(draw):
    """(container, field, params, state): one leaf with another dtype or shape, or a Python scalar/list."""
    container, field = draw(st.sampled_from(FIELDS + [("Topology", n) for n in (
        "springs.pairs", "cloth.triangles", "cloth.bend_edges", "particles.pinned")]))
    source = {"Params": PARAMS, "State": STATE, "Topology": TOPOLOGY}[container]
    array = np.asarray(get_path(source, field))
    how = draw(st.sampled_from(["dtype", "dtype", "grow", "shrink", "extra axis", "scalar", "list"]))
    if how == "dtype":
        new = array.astype(draw(st.sampled_from(DTYPES)))
    elif how == "grow":
        new = np.concatenate([array, array[:1]]) if array.ndim else np.stack([array, array])
    elif how == "shrink":
        new = array[:-1] if array.ndim else array[None]
    elif how == "extra axis":
        new = array[..., None]
    elif how == "scalar":
        new = array.reshape(-1)[0] if array.size else np.float32(1.0)
    else:
        new = array.tolist()
    if container == "Topology":
        return container, field, replace_paths(TOPOLOGY, {field: new}), PARAMS, STATE
    return (container, field, TOPOLOGY, *containers_with(container, field, new))


@bounded(25)
@given(case=one_odd_leaf())
def test_simulate_names_a_leaf_of_the_wrong_dtype_or_shape(case):
    container, field, topology, params, state = case
    try:
        trajectory = gs.simulate(topology, params, state, **RUN)
    except (ValueError, TypeError) as e:
        event(f"refused: {type(e).__name__}")
        # A Topology count that changes (a triangle more) makes the per-element Params the wrong length.
        names = [f"{container}.{field}"] + (["Params."] if container == "Topology" else [])
        assert any(name in str(e) for name in names), (container, field, f"{type(e).__name__}: {e}")
        return
    check_trajectory(trajectory)


# ---------------------------------------------------------------------------------------------------
# Rendering

VERTICES = np.asarray(STATE.particles.x)
FACES = np.asarray(TOPOLOGY.cloth.triangles)
RENDER_NAMES = ("vertices", "faces", "colors", "FaceColors", "VertexColors", "background")


@st.composite
def render_inputs(draw, values_only=False):
    """(vertices, faces, colors, background, which input was changed, the index of a changed value);
    `values_only`: face colours, an RGB background, and one value changed (the shapes of one compiled
    program)."""
    vertices, faces = VERTICES.copy(), FACES.copy()
    colors = "face" if values_only else draw(st.sampled_from(["none", "face", "vertex", "bare"]))
    rgb = {"none": None, "face": np.full((2, 3), 0.5, np.float32), "vertex": np.full((4, 3), 0.5, np.float32),
           "bare": np.full((2, 3), 0.5, np.float32)}[colors]
    backgrounds = [np.zeros(3, np.float32)] + ([] if values_only else [None, np.zeros((8, 8, 3), np.float32)])
    background = draw(st.sampled_from(backgrounds))
    which = draw(st.sampled_from(["vertices", "faces", "colors", "background"] + ([] if values_only else [
        "vertices dtype", "faces dtype", "vertices shape", "faces shape", "colors shape", "background shape"])))
    index = None
    if which == "vertices":
        index = (draw(st.integers(0, 3)), draw(st.integers(0, 2)))
        vertices[index] = draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e30, -5.0]))
    elif which == "faces":
        index = (draw(st.integers(0, 1)), draw(st.integers(0, 2)))
        faces[index] = draw(st.sampled_from([-1, 4, 5, 2**31 - 1, 0]))
    elif which == "colors" and rgb is not None:
        index = (draw(st.integers(0, rgb.shape[0] - 1)), draw(st.integers(0, 2)))
        rgb[index] = draw(st.sampled_from([math.nan, math.inf, -2.0, 7.0]))
    elif which == "background" and background is not None:
        index = tuple(draw(st.integers(0, n - 1)) for n in background.shape)
        background = background.copy()
        background[index] = draw(st.sampled_from([math.nan, -math.inf, 2.0]))
    elif which == "vertices dtype":
        vertices = vertices.astype(draw(st.sampled_from(DTYPES)))
    elif which == "faces dtype":
        faces = faces.astype(draw(st.sampled_from([np.float32, np.bool_, np.int64, np.uint8, np.int8])))
    elif which == "vertices shape":
        vertices = draw(st.sampled_from([vertices[:, :2], vertices[None], vertices.reshape(-1), vertices[:0]]))
    elif which == "faces shape":
        faces = draw(st.sampled_from([faces[:, :2], faces[None], faces.reshape(-1), faces[:0]]))
    elif which == "colors shape" and rgb is not None:
        rgb = draw(st.sampled_from([rgb[:1], rgb[:, :2], rgb[None]]))
    elif which == "background shape":
        background = draw(st.sampled_from([np.zeros(2), np.zeros((8, 7, 3)), np.zeros((8, 8)), np.zeros((1, 1, 1, 3))]))
    wrap = {"face": FaceColors, "vertex": VertexColors}.get(colors)
    if rgb is not None and wrap is not None:
        rgb = wrap(jnp.asarray(rgb))
    return vertices, faces, rgb, background, which, index


def check_image(image):
    image = np.asarray(image)
    assert image.shape == (8, 8, 4) and np.all(np.isfinite(image)), image
    assert image.min() >= 0.0 and image.max() <= 1.0 + 1e-6, (image.min(), image.max())


@bounded(30)
@given(case=render_inputs())
def test_render_draws_or_names_the_input(case):
    vertices, faces, colors, background, which, index = case
    try:
        image = gs.render(CAMERA, vertices, faces, colors, background=background)
    except (ValueError, TypeError) as e:
        event(f"refused: {which}")
        assert any(name in str(e) for name in RENDER_NAMES), f"{which}: {type(e).__name__}: {e}"
        if index is not None and which in ("vertices", "faces"):
            shown = f"{which}{index_text(index[:1] if which == 'faces' else index)}"
            assert shown in str(e), (shown, str(e))
        return
    event("drawn")
    check_image(image)


CHECKED_RENDER = jax.jit(checked_render)


@bounded(30)
@given(case=render_inputs(values_only=True))
def test_checked_render_names_a_traced_bad_value(case):
    """Inside jit: a bad vertex, face index, colour or background entry is named with its index."""
    vertices, faces, colors, background, which, index = case
    err, image = CHECKED_RENDER(CAMERA, vertices, faces, colors, background=background)
    try:
        raise_if_error(err)
    except TracedCheckError as e:
        event(f"refused: {which}")
        assert re.match(r"(faces|vertices|colors\.rgb|colors|background)\[", str(e)), str(e)
        return
    event("drawn")
    check_image(image)
