"""A scene file is parsed once into typed sections (`scenefile.sections`, generated from `SCHEMA`), and each section
is read by one function of one module (`scenefile.reader.SECTION_READERS`): the modules are parsed with `ast`
and a read of `<spec>.sections.<section>` anywhere else fails."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from gradsim_jax.scenefile import SCHEMA, load_scene
from gradsim_jax.scenefile.reader import SECTION_READERS
from gradsim_jax.scenefile.schema import ARRAY_SECTIONS
from gradsim_jax.scenefile.sections import SECTION_TYPES, BodyTable, RenderSection, SceneSections

SRC = Path(__file__).resolve().parents[2] / "src" / "gradsim_jax"

#: Sections left out of the check, and why (none).
EXEMPT: dict[str, str] = {}

#: Modules allowed to read `spec.values[...]`, and why (none).
VALUES_READERS: dict[str, str] = {}


def section_reads() -> dict[str, set[str]]:
    """{section: {"module.function" reading `<x>.sections.<section>`}} over the whole package."""
    reads: dict[str, set[str]] = {}

    def walk(node, module, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Attribute)
                    and child.value.attr == "sections"):
                reads.setdefault(child.attr, set()).add(f"{module}.{function}")
            walk(child, module, inner)

    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).with_suffix("").as_posix().replace("/", ".")
        walk(ast.parse(path.read_text(), str(path)), module, "<module>")
    return reads


def test_every_section_has_a_reader_and_the_map_is_documented():
    assert set(SECTION_READERS) == set(SCHEMA)
    doc = __import__("gradsim_jax.scenefile.reader", fromlist=["_"]).__doc__
    for section, reader in SECTION_READERS.items():
        assert f"`{reader}`" in doc, f"[{section}]'s reader {reader} is not in scenefile.reader's docstring"


@pytest.mark.parametrize("section", [s for s in SCHEMA if s not in EXEMPT])
def test_each_section_is_read_by_one_function_of_one_module(section):
    reader = f"scenefile.{SECTION_READERS[section]}"
    assert section_reads().get(section, set()) == {reader}, (
        f"[{section}] must be read only by {reader} (others take its result), read by "
        f"{sorted(section_reads().get(section, set()))}")


def test_no_module_indexes_spec_values():
    """No `<x>.values[...]` in scenefile/, and no `spec.values[...]` anywhere in the package."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        where = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "values") or where in VALUES_READERS:
                continue
            owner = node.value.value
            if where.startswith("scenefile/") or (isinstance(owner, ast.Name) and owner.id == "spec"):
                found.append(f"{where}:{node.lineno}")
    assert not found, f"read the typed sections (spec.sections) or their reader instead: {found}"


def test_section_types_are_generated_from_the_schema():
    assert [f.name for f in dataclasses.fields(SceneSections)] == list(SCHEMA)
    for section, fields in SCHEMA.items():
        cls = SECTION_TYPES[section]
        assert [f.name for f in dataclasses.fields(cls)] == list(fields)
        for f in dataclasses.fields(cls):
            assert f.metadata["doc"] == fields[f.name].doc and f.metadata["type"] == fields[f.name].type
            assert f"    {f.name}: " in cls.__doc__
    assert RenderSection is SECTION_TYPES["render"] and "render width in pixels" in RenderSection.__doc__


def test_a_scene_file_is_read_into_frozen_typed_sections(tmp_path):
    path = tmp_path / "scene.toml"
    path.write_text("[[body]]\nshape = \"box\"\nhalf_extents = [0.1, 0.2, 0.3]\ncolor = [1.0, 0.0, 0.0]\n"
                    "[render]\nwidth = 32\nbackground_image = \"median\"\n[fit]\nfree = [\"body_mass\"]\n")
    spec = load_scene(path)
    assert isinstance(spec.sections, SceneSections)
    assert spec.sections.render.width == 32 and spec.sections.render.height == 64  # given, default
    assert spec.sections.render.background_image == "median"
    assert isinstance(spec.sections.body, tuple) and isinstance(spec.sections.body[0], BodyTable)
    assert spec.sections.body[0].half_extents == [0.1, 0.2, 0.3]
    assert spec.sections.ball == () and spec.sections.scene.grid is None
    assert spec.values["render"]["width"] == 32 and spec.values["body"][0]["shape"] == "box"
    for section in ARRAY_SECTIONS:
        assert isinstance(spec.values[section], list)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.sections.render.width = 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.sections = None
    spec.values["render"]["width"] = 16  # a copy: the spec is unchanged
    assert spec.sections.render.width == 32
