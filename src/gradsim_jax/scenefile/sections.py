"""The typed sections of a scene file, generated from `SCHEMA` (its one source of truth): one frozen dataclass
per section whose fields are the section's keys, in schema order, each documented (type, default, meaning and
unit) in the class docstring and in the field's metadata (`dataclasses.fields(RenderSection)[0].metadata`).
Array sections ([[body]], ...) are tuples of their table type (`BodyTable`, ...). `SceneSections` holds one
of each; `read_sections` builds it from the checked {section: {key: value}} dict of `reader.read_scene_file`.

Values are kept as the file gives them (lists stay lists, so messages quote them as written)."""

from __future__ import annotations

import dataclasses

from gradsim_jax.scenefile.schema import ARRAY_SECTIONS, SCHEMA, Field

#: The class name of each section's type: `<Name>Section` for a [section], `<Name>Table` for a [[section]] table.
TYPE_NAMES = {section: "".join(w.capitalize() for w in section.split("_"))
              + ("Table" if section in ARRAY_SECTIONS else "Section") for section in SCHEMA}


def _python_type(ftype: str) -> str:
    """The annotation of a SCHEMA type (None allowed: a key without default is None when not given)."""
    if ftype.endswith("]"):
        return "list | None"
    return {"int": "int", "float": "float", "bool": "bool", "str": "str", "str|float": "str | float"}.get(
        ftype, "object") + " | None"


def _field_line(key: str, f: Field) -> str:
    default = "required" if f.required else f"default {f.default!r}"
    return f"    {key}: {f.type}, {default}: {f.doc}."


def section_type(section: str, fields: dict) -> type:
    """A frozen dataclass for one section of `SCHEMA`: one field per key, documented from the schema.

    Args:
        section: the section's name ("render", "body", ...).
        fields: {key: `Field`}, the section's keys in SCHEMA.

    Returns:
        The class, named `TYPE_NAMES[section]` (a registered section: `<Name>Section`), with an `Attributes:`
        docstring listing every key.
    """
    label = f"[[{section}]] table" if section in ARRAY_SECTIONS else f"[{section}] section"
    cls = dataclasses.make_dataclass(
        TYPE_NAMES.get(section, "".join(w.capitalize() for w in section.split("_")) + "Section"),  # or registered
        [(key, _python_type(f.type), dataclasses.field(metadata={"type": f.type, "default": f.default,
                                                                  "doc": f.doc, "required": f.required}))
         for key, f in fields.items()],
        frozen=True)
    cls.__module__ = __name__
    lines = "\n".join(_field_line(k, f) for k, f in fields.items())
    cls.__doc__ = (f"One {label} of a scene file, checked and with the defaults filled in (generated from "
                   f"`SCHEMA['{section}']`).\n\nAttributes:\n{lines}")
    return cls


#: {section: its type}, generated from SCHEMA.
SECTION_TYPES = {section: section_type(section, fields) for section, fields in SCHEMA.items()}


def refresh_section_types(sections=("material", "initial")) -> None:
    """`SECTION_TYPES` of `sections` generated again from `SCHEMA`, in place (after a body kind registered or
    removed the quantities [material] and [initial] take keys for, `scenefile.extensions`).

    Args:
        sections: the sections whose types to make again.
    """
    for section in sections:
        SECTION_TYPES[section] = section_type(section, SCHEMA[section])


SceneSection = SECTION_TYPES["scene"]
MaterialSection = SECTION_TYPES["material"]
PushSection = SECTION_TYPES["push"]
BodyTable = SECTION_TYPES["body"]
SoftBodyTable = SECTION_TYPES["soft_body"]
BodyPushTable = SECTION_TYPES["body_push"]
PendulumSection = SECTION_TYPES["pendulum"]
BallTable = SECTION_TYPES["ball"]
ColliderTable = SECTION_TYPES["collider"]
SmokeSection = SECTION_TYPES["smoke"]
WindSection = SECTION_TYPES["wind"]
CameraSection = SECTION_TYPES["camera"]
RenderSection = SECTION_TYPES["render"]
SimulationSection = SECTION_TYPES["simulation"]
TargetSection = SECTION_TYPES["target"]
FitSection = SECTION_TYPES["fit"]
InitialSection = SECTION_TYPES["initial"]


def _sections_doc() -> str:
    lines = [f"    {s}: `{TYPE_NAMES[s]}`" + (" tables, a tuple (one per table, in file order)."
                                               if s in ARRAY_SECTIONS else ".") for s in SCHEMA]
    return ("Every section of a scene file, typed (generated from `SCHEMA`): array sections are tuples of "
            "their tables.\n\nAttributes:\n" + "\n".join(lines))


SceneSections = dataclasses.make_dataclass(
    "SceneSections",
    [(s, f"tuple[{TYPE_NAMES[s]}, ...]" if s in ARRAY_SECTIONS else TYPE_NAMES[s]) for s in SCHEMA],
    frozen=True)
SceneSections.__module__ = __name__
SceneSections.__doc__ = _sections_doc()


def read_sections(values: dict) -> SceneSections:
    """The typed sections of a checked scene file.

    Args:
        values: {section: {key: value}} for every section of SCHEMA with the defaults filled in, array sections
            lists of such tables (`reader.read_scene_file`).

    Returns:
        The `SceneSections`.
    """
    def record(section, table):
        return SECTION_TYPES[section](**table)

    return SceneSections(**{s: tuple(record(s, t) for t in values[s]) if s in ARRAY_SECTIONS else record(s, values[s])
                            for s in SCHEMA})


def section_values(sections: SceneSections) -> dict:
    """{section: {key: value}} of typed sections, array sections lists of tables: the inverse of
    `read_sections` (a copy; changing it changes nothing).

    Args:
        sections: the `SceneSections`.

    Returns:
        {section: {key: value}} in SCHEMA order.
    """
    out = {}
    for f in dataclasses.fields(sections):
        value = getattr(sections, f.name)
        out[f.name] = ([dataclasses.asdict(t) for t in value] if f.name in ARRAY_SECTIONS
                       else dataclasses.asdict(value))
    return out
