"""Property: whatever a scene file holds (values of every type the schema names, in and out of range,
NaN, infinities, huge numbers, wrong lengths, wrong types, unknown or missing keys and sections, invalid
TOML, random bytes), reading it and building its experiment either succeeds with finite values or stops
with a `SceneFileError` whose message names the file and the section (or the TOML problem): never a
traceback from tomllib, numpy, JAX or the camera code.

The documents are generated from `SCHEMA` itself, so a key added to the schema is tried at once. Scenes
stay tiny (a 1 x 1 grid) and nothing is simulated: building the experiment is the host-side work.
"""

import copy
import datetime
import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

from gradsim_jax.scenefile import SCHEMA, SceneFileError, load_scene
from gradsim_jax.sysid import QUANTITIES

from bounded import bounded

BASE = {
    "scene": {"grid": [1, 1], "cell": [0.2, 0.2], "pos": [-0.1, 0.0, -0.1],
              "rot": [0.7071068, 0.7071068, 0.0, 0.0], "fix": ["left"]},
    "simulation": {"frames": 1, "substeps": 2},
    "render": {"width": 8, "height": 8},
    "fit": {"free": ["mass"], "iterations": 1, "polish": 0},
}
MESH = "v 0 0 0\nv 0.2 0 0\nv 0 0 0.2\nv 0.2 0 0.2\nf 1 2 3\nf 2 4 3\n"
#: Names a str key may hold: files that exist in the scene's folder (a mesh, the scene itself, the folder),
#: missing ones, and the words some keys accept.
NAMES = ["m.obj", "scene.toml", ".", "", "missing.obj", "missing.yml", "median", "box", "softras", "rgb",
         "rgba", "silhouette", "left", "right", "top", "bottom", "~", "a\u0000b", "../" * 3,
         *sorted({a for q in QUANTITIES.values() for a in q.aliases})]

SPECIAL_FLOATS = [0.0, -0.0, -1.0, 1.0, math.nan, math.inf, -math.inf, 1e300, -1e300, 5e-324, 1e-30, 90.0, 180.0]
SPECIAL_INTS = [0, -1, 1, 2, 2**31, 2**63 - 1, -(2**63), 10**12]
FLOATS = st.one_of(st.floats(-3.0, 3.0), st.sampled_from(SPECIAL_FLOATS), st.floats())
INTS = st.one_of(st.integers(-2, 4), st.sampled_from(SPECIAL_INTS))
STRINGS = st.one_of(st.sampled_from(NAMES), st.text(max_size=8))
SCALARS = st.one_of(INTS, FLOATS, st.booleans(), STRINGS, st.dates())
ANY_VALUE = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5)
                         | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=10)


def typed_values(ftype: str):
    """Values of the right TOML type for `ftype` (a SCHEMA type), any magnitude, any list length."""
    if ftype == "int":
        return INTS
    if ftype == "float":
        return st.one_of(FLOATS, INTS)  # an integer is a number too
    if ftype == "bool":
        return st.booleans()
    if ftype == "str":
        return STRINGS
    if "|" in ftype:  # a union: a value of any of its types
        return st.one_of(*(typed_values(part) for part in ftype.split("|")))
    if ftype == "float[4x4]":
        row = st.lists(FLOATS, min_size=3, max_size=5)
        identity = st.just([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0], [0, 0, 0, 1]])
        return st.one_of(identity, st.lists(row, min_size=3, max_size=5))
    elem, count = ftype[:-1].split("[")
    elements = {"int": INTS, "float": FLOATS, "str": STRINGS}[elem]
    if count == "":
        return st.lists(elements, max_size=5)
    n = int(count)
    return st.one_of(st.lists(elements, min_size=n, max_size=n), st.lists(elements, max_size=n + 2))


def has_type(ftype: str, value) -> bool:
    """Whether `value` has the TOML type `ftype` asks for (the scene-file documentation's rule)."""
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    integer = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    if ftype == "int":
        return integer(value)
    if ftype == "float":
        return number(value)
    if ftype == "bool":
        return isinstance(value, bool)
    if ftype == "str":
        return isinstance(value, str)
    if "|" in ftype:
        return any(has_type(part, value) for part in ftype.split("|"))
    if ftype == "float[4x4]":
        return (isinstance(value, list) and len(value) == 4
                and all(isinstance(r, list) and len(r) == 4 and all(map(number, r)) for r in value))
    elem, count = ftype[:-1].split("[")
    check = {"int": integer, "float": number, "str": lambda v: isinstance(v, str)}[elem]
    return isinstance(value, list) and (count == "" or len(value) == int(count)) and all(map(check, value))


# ---------------------------------------------------------------------------------------------------
# A TOML writer (tomllib only reads)


def _toml_string(text: str) -> str:
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def toml_document(doc: dict) -> str:
    """Top-level values first (a section that is not a table), then one [section] table each."""
    lines = [f"{_toml_string(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for section, table in doc.items():
        if isinstance(table, dict):
            lines.append(f"[{_toml_string(section)}]")
            lines += [f"{_toml_string(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------
# Documents


@st.composite
def scene_documents(draw):
    """BASE with 0 to 5 random edits: a key set to a value of its type (any magnitude), to a value of any
    type, removed; an unknown key or section; a section that is not a table; a section removed."""
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["typed", "typed", "typed", "typed", "any", "drop", "unknown key",
                                     "unknown section", "not a table", "drop section"]))
        section = draw(st.sampled_from(sorted(SCHEMA)))
        table = doc.setdefault(section, {})
        if not isinstance(table, dict):
            continue
        key = draw(st.sampled_from(sorted(SCHEMA[section])))
        if kind == "typed":
            table[key] = draw(typed_values(SCHEMA[section][key].type))
        elif kind == "any":
            table[key] = draw(ANY_VALUE)
        elif kind == "drop":
            table.pop(key, None)
        elif kind == "unknown key":
            table[draw(st.text(min_size=1, max_size=6))] = draw(SCALARS)
        elif kind == "unknown section":
            doc[draw(st.text(min_size=1, max_size=6))] = {}
        elif kind == "not a table":
            doc[section] = draw(st.one_of(SCALARS, st.lists(st.just({}), min_size=1, max_size=2)))
        else:
            del doc[section]
    return doc


def scene_folder(text: str | bytes):
    """A temporary folder holding scene.toml (`text`) and a small valid mesh m.obj."""
    folder = tempfile.TemporaryDirectory()
    root = Path(folder.name)
    (root / "m.obj").write_text(MESH)
    path = root / "scene.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return folder, path


def assert_finite_experiment(exp):
    """What a built experiment promises: finite scene, camera and colours, at least one frame."""
    assert exp.frames >= 1 and exp.substeps >= 1 and math.isfinite(exp.frame_dt) and exp.frame_dt > 0
    for leaf in (exp.state0.particles.x, exp.state0.particles.v, exp.camera.rotation, exp.camera.translation, exp.camera.focal,
                 exp.camera.principal, exp.camera.near, exp.camera.far, exp.background):
        assert np.all(np.isfinite(np.asarray(leaf))), exp
    assert float(exp.camera.near) > 0 and float(exp.camera.far) > float(exp.camera.near)


def build(path, frames=None):
    """What `gradsim-jax fit` and `render` do with a scene file before they simulate."""
    spec = load_scene(path)
    background = spec.background_image()
    exp = spec.experiment(frames=frames, background_image=background)
    spec.initial_theta(exp)
    spec.content_sha256()
    return exp


def check_outcome(path, frames=None):
    """Success with finite values, or a SceneFileError naming the file and a section (or TOML)."""
    try:
        exp = build(path, frames)
    except SceneFileError as e:
        message = str(e)
        event("SceneFileError")
        assert str(path) in message, message
        named = any(f"[{s}]" in message for s in SCHEMA) or "unknown section" in message
        assert named or "TOML" in message or (frames is not None and "the target" in message), message
        return e
    assert_finite_experiment(exp)
    event("built")
    return None


@bounded(200)
@given(doc=scene_documents(), frames=st.one_of(st.none(), st.integers(-2, 3)))
def test_any_scene_file_builds_or_names_file_and_section(doc, frames):
    folder, path = scene_folder(toml_document(doc))
    with folder:
        check_outcome(path, frames)


@bounded(60)
@given(data=st.data())
def test_a_value_of_the_wrong_type_names_its_section_and_key(data):
    section = data.draw(st.sampled_from(sorted(SCHEMA)))
    key = data.draw(st.sampled_from(sorted(SCHEMA[section])))
    ftype = SCHEMA[section][key].type
    value = data.draw(ANY_VALUE.filter(lambda v: not has_type(ftype, v)))
    doc = copy.deepcopy(BASE)
    doc.setdefault(section, {})[key] = value
    folder, path = scene_folder(toml_document(doc))
    with folder:
        error = check_outcome(path)
    assert error is not None and f"[{section}] {key}" in str(error), (section, key, value, error)


@bounded(40)
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_random_bytes_are_not_a_scene_file(data):
    folder, path = scene_folder(data)
    with folder:
        check_outcome(path)


@bounded(40)
@given(cut=st.integers(0, len(toml_document(BASE))), junk=st.binary(max_size=12))
def test_a_truncated_or_spliced_scene_file_is_refused_or_read(cut, junk):
    text = toml_document(BASE).encode()
    folder, path = scene_folder(text[:cut] + junk)
    with folder:
        check_outcome(path)
