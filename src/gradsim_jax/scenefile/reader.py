"""Reading a scene file: TOML parsed and checked against `SCHEMA` (unknown section or key, wrong type, missing
required key: `SceneFileError` naming the file and the key), defaults filled in, renamed keys read with a
DeprecationWarning; the result is a `SceneSpec`, plain data: one typed, frozen record per section
(`scenefile.sections`, generated from SCHEMA). `load_scene` also checks [fit], the quantity values and every
number before anything is built.

Each section is read by one function of one module (`SECTION_READERS`), which turns it into what the rest of
the package uses; other modules take that function's result, never the section (tests/cli/
test_cli_scenefile_readers.py checks it with `ast`):

    [scene]        `world.read_scene` -> SceneOptions (the cloth's layout, the ground and contacts)
    [material]     `world.read_material` -> MaterialOptions (the cloth's material, gravity, registry values)
    [push]         `build.read_push` -> PushOptions
    [[body]]       `bodies.read_bodies` -> RigidBodies (their Scene and colours)
    [[soft_body]]  `bodies.read_soft_bodies` -> one Scene piece per table
    [[body_push]]  `bodies.add_body_pushes` -> the Scene with the pushes
    [pendulum]     `ode.read_ode_body` -> OdeBody (with [[ball]]: one ODE body per file)
    [[ball]]       `ode.read_ode_body` -> OdeBody
    [[collider]]   `colliders.read_colliders` (its colours go to `render.read_look` through `Colliders.colors`)
    [smoke]        `smoke.read_smoke` -> SmokeParts (the grid, its look, its substeps)
    [wind]         `wind.read_wind` -> WindOptions (direction, strength, keyframes), or None
    [camera]       `camera.read_camera_keys` -> (CameraIntrinsics, CameraPlacement)
    [render]       `render.read_render` -> RenderOptions
    [simulation]   `build.read_simulation` -> SimulationOptions
    [target]       `target.read_target` -> TargetFiles
    [fit]          `fit.read_fit_settings` -> FitSettings (the FitConfig, the edge settings given)
    [initial]      `quantities.read_initial` -> {key: value} of the keys given
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

from gradsim_jax.scenefile.extensions import body_records, load_plugins
from gradsim_jax.scenefile.schema import (ARRAY_SECTIONS, BODY_SECTIONS, RENAMED, REQUIRED_SECTIONS, SCHEMA,
                                          SceneFileError)
from gradsim_jax.scenefile.sections import SceneSections, read_sections, section_values
from gradsim_jax.scenefile.target import read_target
from gradsim_jax.scenefile.world import read_scene


#: {section: "module.function"} of the one function (in `gradsim_jax.scenefile`) that reads each section.
SECTION_READERS = {"scene": "world.read_scene", "material": "world.read_material", "push": "build.read_push",
                   "body": "bodies.read_bodies", "soft_body": "bodies.read_soft_bodies",
                   "body_push": "bodies.add_body_pushes", "pendulum": "ode.read_ode_body", "ball": "ode.read_ode_body",
                   "collider": "colliders.read_colliders", "smoke": "smoke.read_smoke",
                   "wind": "wind.read_wind",
                   "camera": "camera.read_camera_keys", "render": "render.read_render",
                   "simulation": "build.read_simulation", "target": "target.read_target",
                   "fit": "fit.read_fit_settings", "initial": "quantities.read_initial"}


def _check_type(path, section, key, value, ftype):
    """SceneFileError unless `value` has the SCHEMA type `ftype`; `section` is a name ("fit") or, for a table
    of an array section, its label ("[[body]] 2:")."""
    where = section if section.startswith("[") else f"[{section}]"

    def fail(expected):
        raise SceneFileError(f"{path}: {where} {key} must be {expected}, got {value!r}")

    is_num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    is_int = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    if ftype == "int":
        if not is_int(value):
            fail("an integer")
    elif ftype == "float":
        if not is_num(value):
            fail("a number")
    elif ftype == "bool":
        if not isinstance(value, bool):
            fail("true or false")
    elif ftype == "str":
        if not isinstance(value, str):
            fail("a string")
    elif ftype == "float|float[]":
        if not (is_num(value) or (isinstance(value, list) and value and all(is_num(v) for v in value))):
            fail("a number or a list of numbers")
    elif ftype == "str|float":
        if not (isinstance(value, str) or is_num(value)):
            fail("a string or a number")
    elif ftype == "float[4x4]":
        if not (isinstance(value, list) and len(value) == 4
                and all(isinstance(r, list) and len(r) == 4 and all(is_num(v) for v in r) for r in value)):
            fail("a 4 x 4 matrix (a list of 4 rows of 4 numbers)")
    elif ftype.endswith("[]"):
        elem = ftype[:-2]
        check = {"int": is_int, "float": is_num, "str": lambda v: isinstance(v, str)}[elem]
        if not isinstance(value, list) or not all(check(v) for v in value):
            fail(f"a list of {dict(int='integers', float='numbers', str='strings')[elem]}")
    else:
        elem, count = ftype[:-1].split("[")
        count = int(count)
        check = is_int if elem == "int" else is_num
        if not isinstance(value, list) or len(value) != count or not all(check(v) for v in value):
            fail(f"a list of {count} {'integers' if elem == 'int' else 'numbers'}")


def read_scene_file(path) -> dict:
    """Parse and validate a scene file: {section: {key: value}} with defaults filled in.

    Args:
        path: the scene file (TOML), a str or Path.

    Returns:
        {section: {key: value}} for every section of `SCHEMA` (renamed keys under their new names), then for each
        registered section the file has (`scenefile.extensions.BODY_SECTIONS`); array sections ([[body]], ...)
        are lists of such tables. The plugin files of [scene] plugins are imported first.

    Raises:
        SceneFileError: naming the file and the key, for a missing or unreadable file, an unknown section or
            key, a wrong type, a missing required key, or a plugin file that is missing or raises.
    """
    path = Path(path)
    if not path.is_file():
        raise SceneFileError(f"{path}: scene file not found")
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:  # TOML is UTF-8 text
        raise SceneFileError(f"{path}: not valid TOML: {e}") from e
    load_plugins(path, raw)
    for section, value in raw.items():
        if section not in SCHEMA and section not in BODY_SECTIONS:
            raise SceneFileError(f"{path}: unknown section [{section}]; known sections: "
                                 f"{', '.join([*SCHEMA, *BODY_SECTIONS])}")
        if section in ARRAY_SECTIONS:
            if not (isinstance(value, dict) or (isinstance(value, list) and value
                                                and all(isinstance(t, dict) for t in value))):
                raise SceneFileError(f"{path}: {section} must be [[{section}]] tables (one per entry)")
        elif not isinstance(value, dict):
            raise SceneFileError(f"{path}: {section} must be a [{section}] table")
    for section in REQUIRED_SECTIONS:
        bodies = ("body", "soft_body", "ball", "pendulum", "smoke")
        if section not in raw and not (section == "scene" and any(raw.get(k) for k in bodies)):
            raise SceneFileError(f"{path}: missing section [{section}]")
    out = {}
    for section in ARRAY_SECTIONS:
        tables = raw.get(section, [])
        if isinstance(tables, dict):  # a single [body] table: one body, named as written
            out[section] = [_read_table(path, section, f"[{section}]", tables)]
        else:
            out[section] = [_read_table(path, section, f"[[{section}]] {i}:", t) for i, t in enumerate(tables)]
    for section, fields in SCHEMA.items():
        if section in ARRAY_SECTIONS:
            continue
        given = dict(raw.get(section, {}))
        for old, new in RENAMED.get(section, {}).items():
            if old in given:
                if new in given:
                    raise SceneFileError(f"{path}: [{section}] gives both {old!r} and {new!r} (the new name of "
                                         f"{old!r}): keep {new!r}")
                warnings.warn(f"{path}: [{section}] {old!r} is now called {new!r}", DeprecationWarning,
                              stacklevel=2)
                given[new] = given.pop(old)
        for key, value in given.items():
            if key not in fields:
                raise SceneFileError(
                    f"{path}: unknown key {key!r} in [{section}]; known keys: {', '.join(fields)}")
            _check_type(path, section, key, value, fields[key].type)
        for key, f in fields.items():
            if f.required and key not in given:
                raise SceneFileError(f"{path}: missing key {key!r} in [{section}]")
        out[section] = {key: given.get(key, f.default) for key, f in fields.items()}
    return {**out, **read_body_sections(path, raw)}


def _read_table(path, section: str, label: str, given: dict) -> dict:
    """One table of an array section, checked against SCHEMA[section] (messages name it by `label`, e.g.
    "[[body]] 2:"), with defaults filled in."""
    return check_table(path, SCHEMA[section], label, given)


def check_table(path, fields: dict, label: str, given: dict) -> dict:
    """One table checked against its fields, with the defaults filled in.

    Args:
        path: the scene file (named in messages).
        fields: {key: `schema.Field`}, the table's keys.
        label: how messages name the table ("[[body]] 2:", "[chain]").
        given: {key: value} as the file gives them.

    Returns:
        {key: value} for every key of `fields`.

    Raises:
        SceneFileError: for an unknown key, a wrong type or a missing required key.
    """
    for key, value in given.items():
        if key not in fields:
            raise SceneFileError(f"{path}: {label} unknown key {key!r}; known keys: {', '.join(fields)}")
        _check_type(path, label, key, value, fields[key].type)
    for key, f in fields.items():
        if f.required and key not in given:
            raise SceneFileError(f"{path}: {label} missing key {key!r}")
    return {key: given.get(key, f.default) for key, f in fields.items()}


def read_body_sections(path, raw: dict) -> dict:
    """The registered sections a parsed scene file has (`schema.BODY_SECTIONS`), checked against their fields,
    defaults filled in.

    Args:
        path: the scene file (named in messages).
        raw: the file's parsed TOML.

    Returns:
        {section name: {key: value}} for each registered section the file has, in registry order.

    Raises:
        SceneFileError: naming the file and the key, for a section that is no table, an unknown key, a wrong
            type or a missing required key.
    """
    out = {}
    for name, section in BODY_SECTIONS.items():
        if name in raw:
            if not isinstance(raw[name], dict):
                raise SceneFileError(f"{path}: {name} must be a [{name}] table")
            out[name] = check_table(path, section.fields, f"[{name}]", raw[name])
    return out


def check_numbers(spec) -> None:
    """Every number of a float key finite and within float32's range (simulations run in float32), the
    registered sections' too; [target] tolerance positive.

    Args:
        spec: the scene file (`SceneSpec`) whose values to check.

    Raises:
        SceneFileError: naming the file, the section and the key of the first bad number.
    """
    limit = float(np.finfo(np.float32).max)
    values = section_values(spec.sections)
    checked = [(fields, [(f"[[{section}]] {i}:", t) for i, t in enumerate(values[section])]
                if section in ARRAY_SECTIONS else [(f"[{section}]", values[section])])
               for section, fields in SCHEMA.items()]
    checked += [(BODY_SECTIONS[name].fields, [(f"[{name}]", dataclasses.asdict(record))])
                for name, record in spec.extras.items()]
    for fields, tables in checked:
        for label, table in tables:
            for key, f in fields.items():
                value = table[key]
                if value is None or not f.type.startswith("float"):
                    continue
                flat = np.asarray(value, np.float64).reshape(-1)
                if not np.all(np.abs(flat) <= limit):  # NaN fails too
                    raise SceneFileError(f"{spec.path}: {label} {key} must be finite (at most {limit:.3g} "
                                         f"in magnitude), got {value!r}")
    read_target(spec)  # tolerance positive


@dataclasses.dataclass(frozen=True)
class SceneSpec:
    """A validated scene file as plain data: `sections` (`SceneSections`: one typed record per section,
    defaults filled in; array sections are tuples of tables), `extras` (the registered sections it has,
    `scenefile.extensions`) and `path` (relative paths in it are relative to
    its folder). Nothing is built here; the methods below call the section readers (`scenefile.fit`,
    `camera`, `quantities`, `render`) and the builder (`scenefile.build`)."""

    path: Path
    sections: SceneSections
    #: {name: typed record} of the registered sections the file has (`scenefile.extensions.BODY_SECTIONS`).
    extras: dict = dataclasses.field(default_factory=dict)

    @property
    def values(self) -> dict:
        """{section: {key: value}} (array sections: lists of tables), a copy made from `sections`."""
        return section_values(self.sections)

    def resolve(self, relative: str) -> Path:
        """A path named in the file, as a Path one can open.

        Args:
            relative: the path as written in the file (`~` expanded; relative to the scene file's folder
                unless absolute).

        Returns:
            The Path.
        """
        p = Path(relative).expanduser()
        return p if p.is_absolute() else self.path.parent / p

    def content_sha256(self) -> str:
        """sha256 of the parsed values that describe the scene, i.e. all but [target], [fit] and [initial]
        (a fit records those apart: the target's frames, its settings and its initial guess)."""
        scene = {k: v for k, v in section_values(self.sections).items() if k not in ("target", "fit", "initial")}
        if not scene["scene"]["plugins"]:  # (files without plugins hash as they did before the key)
            del scene["scene"]["plugins"]
        scene.update({k: dataclasses.asdict(v) for k, v in self.extras.items()})  # registered body sections
        return hashlib.sha256(json.dumps(scene, sort_keys=True).encode()).hexdigest()

    @property
    def fit_config(self):
        """[fit] as a `FitConfig` (`scenefile.fit.read_fit`)."""
        from gradsim_jax.scenefile.fit import read_fit

        return read_fit(self)

    def check_initial(self) -> None:
        """`scenefile.quantities.check_initial`."""
        from gradsim_jax.scenefile.quantities import check_initial

        check_initial(self)

    def check_numbers(self) -> None:
        """`check_numbers`: every float finite and within float32's range."""
        check_numbers(self)

    def initial_theta(self, exp) -> dict:
        """The experiment's theta with [initial] values for the free quantities (`scenefile.quantities`).

        Args:
            exp: the `Experiment` built from this file (`experiment()`).

        Returns:
            {quantity name: value} in the experiment's dtype.
        """
        from gradsim_jax.scenefile.quantities import initial_theta

        return initial_theta(self, exp)

    def calibration(self):
        """[camera]'s intrinsics as a `Calibration`, or None (`scenefile.camera.read_calibration`)."""
        from gradsim_jax.scenefile.camera import read_calibration

        return read_calibration(self)

    def camera(self, native_size=None):
        """The render camera of [camera] at the [render] size (`scenefile.camera.read_camera`).

        Args:
            native_size: (height, width) pixels of the target's frames, which the intrinsics refer to by
                default, or None.

        Returns:
            The `render.Camera`.
        """
        from gradsim_jax.scenefile.camera import read_camera

        return read_camera(self, native_size)

    def background_image(self, target_frames=None, undistort=None):
        """[render] background_image at the render size, or None (`scenefile.render.read_background_image`).

        Args:
            target_frames: [T, H, W, >=3] float frames in [0, 1] of the target, for "median"; or None.
            undistort: function removing lens distortion from one frame [H, W, C] (the target's), or None.

        Returns:
            [H, W, 3] float32 RGB in [0, 1], or None when background_image is not set.
        """
        from gradsim_jax.scenefile.render import read_background_image

        return read_background_image(self, target_frames, undistort)

    def experiment(self, frames: Optional[int] = None, *, native_size=None, background_image=None):
        """The built `Experiment` (`scenefile.build.build_experiment`).

        Args:
            frames: simulated frames after the initial state (the target's count minus one), or None when
                [simulation] frames gives them; [simulation] frames wins when set.
            native_size: (height, width) pixels of the target's frames, or None.
            background_image: [H, W, 3] float RGB in [0, 1] behind the scene at the render size, or None.

        Returns:
            The `Experiment`.
        """
        from gradsim_jax.scenefile.build import build_experiment

        return build_experiment(self, frames, native_size=native_size, background_image=background_image)


def load_scene(path) -> SceneSpec:
    """Read and validate a scene file (SceneFileError on any problem).

    Args:
        path: the scene file (TOML), a str or Path.

    Returns:
        The `SceneSpec`, with [fit], [initial] and [material] quantity values and every number checked.

    Raises:
        SceneFileError: naming the file and the key, on any problem.
    """
    values = read_scene_file(path)
    spec = SceneSpec(path=Path(path), sections=read_sections(values),
                     extras=body_records({k: v for k, v in values.items() if k not in SCHEMA}))
    spec.fit_config  # validates [fit] now rather than after the target is loaded
    spec.check_initial()
    spec.check_numbers()  # after the checks above, whose messages say more about their keys
    mesh = read_scene(spec).cloth.mesh_path
    if mesh is not None and not mesh.is_file():
        raise SceneFileError(f"{path}: [scene] mesh file not found: {mesh}")
    return spec
