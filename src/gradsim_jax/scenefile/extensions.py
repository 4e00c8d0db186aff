"""A body kind defined outside the package, added to every layer at once (`register_body_kind`), and the
scene-file side of it: its section (`BodySection`, found by name in `BODY_SECTIONS`) and the plugin files a
scene file names in [scene] plugins (`load_plugins`: imported once by path, before the file is checked). The
reader checks a registered section's keys as it checks the built-in sections' (`reader.read_scene_file`).

A `BodyKindParts` record bundles what each layer looks up by the kind's name: its physics (`physics.component.
ExtraBodyKind`, registry `physics.components.COMPONENTS`), its drawing (`render.drawings.Drawing`, registry
`render.drawings.DRAWINGS`), what it composites over the meshes (`render.overlays.Overlay`, registry `OVERLAYS`),
its sections of report.json (`sysid.outputs.sections.ReportSection`, registry `REPORT_SECTIONS`), why windowed
fits refuse it (`sysid.windows.kinds.WindowRefusal`, registry `WINDOW_REFUSALS`), its quantities (`sysid.registry.Quantity`, registry `QUANTITIES`; their fields
address `Params.bodies[name]`, e.g. "bodies.chain.ke"; [material] and [initial] take their keys) and its
scene-file section (`BodySection`: its keys, typed like the built-in sections by `sections.section_type`, and a
reader that turns the section into the kind's branches, `KindBranches`). `scenefile.build` adds the branches of
every registered section a file has to the built trees. examples/extending/spring_chain.py is a worked one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any, Callable

from gradsim_jax.physics.component import ExtraBodyKind
from gradsim_jax.physics.components import register_component, unregister_component
from gradsim_jax.render.drawings import Drawing, register_drawing, unregister_drawing
from gradsim_jax.render.overlays import Overlay, register_overlay, unregister_overlay
from gradsim_jax.scenefile.schema import BODY_SECTIONS, SCHEMA, Field, SceneFileError, refresh_quantity_fields
from gradsim_jax.scenefile.sections import refresh_section_types, section_type
from gradsim_jax.sysid.outputs.sections import register_report_section, unregister_report_section
from gradsim_jax.sysid.registry import Quantity, register, unregister
from gradsim_jax.sysid.windows.kinds import WINDOW_REFUSALS, WindowRefusal, register_window_refusal


@dataclasses.dataclass(frozen=True)
class KindBranches:
    """A kind's branches of the three trees, as its section's reader makes them.

    Attributes:
        topology: its branch of `Topology.bodies` (structure: indices, counts).
        params: its branch of `Params.bodies` (what a fit may identify).
        state: its branch of the initial `State.bodies`.
    """

    topology: Any
    params: Any
    state: Any


@dataclasses.dataclass(frozen=True)
class BodySection:
    """A [name] section of scene files that adds a body of a registered kind.

    Attributes:
        name: the section's name, the kind's name too (its key in the trees' `bodies` dicts).
        fields: {key: `schema.Field`}: its keys, types, defaults and meaning (as `SCHEMA`'s sections).
        read: `read(section, spec) -> KindBranches`: the section (its typed record, `record_type`) and the
            `SceneSpec` (for `spec.path` in messages, `spec.resolve`); raises `SceneFileError` for bad values.
        doc: one line for `help_text`.
    """

    name: str
    fields: dict
    read: Callable
    doc: str = ""

    @property
    def record_type(self) -> type:
        """The frozen dataclass of the section's values, generated from `fields` (`sections.section_type`)."""
        return section_type(self.name, self.fields)


@dataclasses.dataclass(frozen=True)
class BodyKindParts:
    """Everything a body kind defined outside the package adds, one entry per layer.

    Attributes:
        kind: the physics (`physics.component.ExtraBodyKind`); its `name` names the rest.
        drawing: what it is drawn as (`render.drawings.Drawing` of the same name), or None (not drawn).
        quantities: the `sysid.registry.Quantity`s a fit may identify of it.
        section: its scene-file section (`BodySection` of the same name), or None (no scene-file section).
        overlay: what it composites over the meshes (`render.overlays.Overlay` of the same name), or None.
        report_sections: its `sysid.outputs.sections.ReportSection`s (report.json keys of their own).
        window_refusal: why windowed fits refuse it (`sysid.windows.kinds.WindowRefusal` of the same kind), or
            None (they take it).
    """

    kind: ExtraBodyKind
    drawing: Drawing | None = None
    quantities: tuple = ()
    section: BodySection | None = None
    overlay: Overlay | None = None
    report_sections: tuple = ()
    window_refusal: WindowRefusal | None = None


#: {resolved plugin file: its module}: each file is imported once.
LOADED_PLUGINS: dict[Path, types.ModuleType] = {}
#: {kind name: the names of its registered quantities} (for `unregister_body_kind`).
_KIND_QUANTITIES: dict[str, tuple] = {}
#: {kind name: the names of its registered report sections} (for `unregister_body_kind`).
_KIND_SECTIONS: dict[str, tuple] = {}


def register_body_kind(body: BodyKindParts) -> BodyKindParts:
    """Register a body kind in every layer: its physics, drawing, overlay, report sections, window refusal,
    quantities and scene-file section.

    Args:
        body: the `BodyKindParts` record (its drawing and section named as its kind).

    Returns:
        `body`.

    Raises:
        TypeError: for a kind that is no `ExtraBodyKind`, a drawing that is no `Drawing`, a quantity that is no
            `Quantity` (likewise an overlay, a report section, a window refusal).
        ValueError: for names that disagree, a section named as a built-in one, or a quantity name taken.
    """
    name = body.kind.name if isinstance(body.kind, ExtraBodyKind) else None
    if name is None:
        raise TypeError(f"a body kind must be a physics.component.ExtraBodyKind, got {type(body.kind).__name__}")
    for part in (body.drawing, body.section, body.overlay):
        if part is not None and part.name != name:
            raise ValueError(f"{type(part).__name__} {part.name!r} of the body kind {name!r} must have its name")
    if body.window_refusal is not None and body.window_refusal.kind != name:
        raise ValueError(f"the window refusal of the body kind {name!r} must name it, got {body.window_refusal.kind!r}")
    if body.section is not None and body.section.name in SCHEMA:
        raise ValueError(f"[{name}] is a built-in section of scene files; give the kind another name")
    if not all(isinstance(q, Quantity) for q in body.quantities):
        raise TypeError(f"the quantities of the body kind {name!r} must be sysid.registry.Quantity records")
    register_component(body.kind)
    if body.drawing is not None:
        register_drawing(body.drawing)
    if body.overlay is not None:
        register_overlay(body.overlay)
    for section in body.report_sections:
        register_report_section(section)
    _KIND_SECTIONS[name] = tuple(s.name for s in body.report_sections)
    if body.window_refusal is not None:
        register_window_refusal(body.window_refusal)
    for q in body.quantities:
        register(q)
    _KIND_QUANTITIES[name] = tuple(q.name for q in body.quantities)
    if body.section is not None:
        BODY_SECTIONS[name] = body.section
    refresh_quantity_fields()
    refresh_section_types()
    return body


def unregister_body_kind(name: str) -> None:
    """Remove the body kind called `name` from every layer (nothing where it is not registered).

    Args:
        name: the kind's name.
    """
    unregister_component(name)
    unregister_drawing(name)
    unregister_overlay(name)
    for section in _KIND_SECTIONS.pop(name, ()):
        unregister_report_section(section)
    WINDOW_REFUSALS.pop(name, None)
    for quantity in _KIND_QUANTITIES.pop(name, ()):
        unregister(quantity)
    BODY_SECTIONS.pop(name, None)
    refresh_quantity_fields()
    refresh_section_types()


def plugin_files(path: Path, raw: dict) -> list[Path]:
    """The plugin files a parsed scene file names in [scene] plugins, resolved against its folder.

    Args:
        path: the scene file.
        raw: the file's parsed TOML (not yet checked).

    Returns:
        The files, in the order given.

    Raises:
        SceneFileError: when plugins is not a list of strings.
    """
    scene = raw.get("scene")
    names = scene.get("plugins", []) if isinstance(scene, dict) else []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SceneFileError(f"{path}: [scene] plugins must be a list of strings, got {names!r}")
    return [p if p.is_absolute() else path.parent / p for p in (Path(n).expanduser() for n in names)]


def load_plugins(path: Path, raw: dict) -> None:
    """Import every plugin file the scene file names (each file once per process), so that the kinds they
    register are known when the file is checked.

    Args:
        path: the scene file.
        raw: the file's parsed TOML (not yet checked).

    Raises:
        SceneFileError: naming the scene file and the plugin, for a plugin that is missing or raises.
    """
    for file in plugin_files(path, raw):
        try:
            key = file.resolve()
            found = key.is_file()
        except (OSError, ValueError):  # a name the system refuses (too long, a NUL byte)
            found = False
        if found and key in LOADED_PLUGINS:
            continue
        if not found:
            raise SceneFileError(f"{path}: [scene] plugins: file not found: {file}")
        LOADED_PLUGINS[key] = _import_file(path, key)


def _import_file(path: Path, file: Path) -> types.ModuleType:
    name = f"gradsim_plugin_{file.stem}_{hashlib.sha256(str(file).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the plugin's own error, whatever it is, named with the file
        del sys.modules[name]
        raise SceneFileError(f"{path}: [scene] plugins: {file} raised {type(e).__name__}: {e}") from e
    return module


def body_records(values: dict) -> dict:
    """The typed records of the registered sections of a checked file.

    Args:
        values: {section name: {key: value}} (`read_body_sections`).

    Returns:
        {section name: its record (`BodySection.record_type`)}.
    """
    return {name: BODY_SECTIONS[name].record_type(**table) for name, table in values.items()}


def body_branches(spec) -> dict:
    """The branches of every registered section the scene file has (each section's `read`).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        {kind name: `KindBranches`}.

    Raises:
        SceneFileError: from a section's reader, or for a reader that returns no `KindBranches`.
    """
    out = {}
    for name, record in spec.extras.items():
        branches = BODY_SECTIONS[name].read(record, spec)
        if not isinstance(branches, KindBranches):
            raise SceneFileError(f"{spec.path}: [{name}]: its reader must return KindBranches, got "
                                 f"{type(branches).__name__}")
        out[name] = branches
    return out


__all__ = ["BODY_SECTIONS", "BodyKindParts", "BodySection", "Field", "KindBranches", "LOADED_PLUGINS", "body_branches",
           "body_records", "load_plugins", "register_body_kind", "unregister_body_kind"]
