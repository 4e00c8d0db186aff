"""Mode strings compared outside their registry, and the registries themselves.

Three concepts have a registry of named modes, each in its own module: the image losses
(`gradsim_jax.fit.image_losses`), the coverage (edge) models (`gradsim_jax.render.coverage_models`) and the
appearance models (`gradsim_jax.render.appearance`). Code elsewhere asks the registry (`loss_kind(name).
uses_alpha`, `coverage_model(name).alternative`, `appearance(name).hand_vjp`) instead of testing a name.

The checker reads src/gradsim_jax with `ast` (nothing is imported) and, for every registered name, finds a
string literal of it outside the registry's own module that is

- compared: `==` / `!=` against it, or `in` / `not in` a literal tuple, list or set holding it;
- a key of a dict literal used as a table of the modes (subscripted or `.get` by an expression, or
  assigned to a name);
- a `case` value of a `match`.

The same word may be another concept ("box" is also a rigid body's or a collider's shape, "texture" a demo's
and a fitted quantity's name), so each registry's check is scoped to the contexts that are its concept: the
other side of the comparison (the dict's subscript, or the name it is assigned to; the match's subject) must
name it (an identifier, attribute, string subscript or `.get` key matching the registry's `context`: loss/kind
for losses; coverage/edge_model/model for coverage; kind/appearance/colo(u)r for appearance). A literal
collection compared against, holding two or more names of one registry, is that concept whatever the other
side is called. Not matched: the renderer-only demos' `rasterizer` option (scenes/shape.py `RASTERIZERS`,
scenes/texture.py), a demo's own table of the coverage models it offers, named by their registered names.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.fit.image_losses import IMAGE_LOSSES, LOSSES, loss_kind
from gradsim_jax.render.appearance import APPEARANCE_MODELS, appearance, appearance_of
from gradsim_jax.render.coverage_models import COVERAGE_MODELS, coverage_model

SRC = Path(__file__).resolve().parents[1] / "src"


@dataclasses.dataclass(frozen=True)
class Registry:
    concept: str
    module: str  # its own module, relative to src/
    names: tuple
    context: re.Pattern  # identifiers that name the concept


REGISTRIES = (
    Registry("image loss", "gradsim_jax/fit/image_losses.py", LOSSES, re.compile(r"loss|^kind$", re.I)),
    Registry("coverage model", "gradsim_jax/render/coverage_models.py", COVERAGE_MODELS,
             re.compile(r"coverage|edge_model|^model$", re.I)),
    Registry("appearance model", "gradsim_jax/render/appearance.py", APPEARANCE_MODELS,
             re.compile(r"kind|appearance|colou?r", re.I)),
)


def _identifiers(node) -> set:
    """The names an expression is made of: variables, attributes, string subscripts and `.get` keys."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant):
            if isinstance(sub.slice.value, str):
                found.add(sub.slice.value)
        elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "get" and sub.args
              and isinstance(sub.args[0], ast.Constant) and isinstance(sub.args[0].value, str)):
            found.add(sub.args[0].value)
    return found


def _literal_strings(node) -> set:
    """The strings of a literal: a string constant, or the string constants of a tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _hit(registry: Registry, names: set, other, any_two: bool = True) -> bool:
    named = other is not None and any(registry.context.search(i) for i in _identifiers(other))
    return bool(names) and (named or (any_two and len(names) >= 2))


def _compare_hits(node: ast.Compare):
    operands = [node.left, *node.comparators]
    for op, a, b in zip(node.ops, operands, operands[1:]):
        if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
            yield a, b
            yield b, a


def _dict_context(node: ast.Dict, parents: dict):
    """What a dict literal is looked up by or assigned to (None: neither)."""
    parent = parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return parent.slice
    if (isinstance(parent, ast.Attribute) and parent.attr == "get" and isinstance(parents.get(parent), ast.Call)
            and parents[parent].args):
        return parents[parent].args[0]
    if isinstance(parent, ast.Assign):
        return ast.Tuple(elts=parent.targets, ctx=ast.Load())
    if isinstance(parent, ast.AnnAssign):
        return parent.target
    return None


def _match_values(pattern) -> set:
    found = set()
    for sub in ast.walk(pattern):
        if isinstance(sub, ast.MatchValue) and isinstance(sub.value, ast.Constant) and isinstance(sub.value.value, str):
            found.add(sub.value.value)
    return found


def violations_in(source: str, path: str, registries=REGISTRIES) -> list:
    """'path:line: <concept> name(s) [...] <how>' for each mode string used outside its registry in `source`."""
    tree = ast.parse(source, path)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for registry in registries:
        if path.endswith(registry.module):
            continue
        known = set(registry.names)

        def report(node, names, how):
            found.append(f"{path}:{node.lineno}: {registry.concept} name(s) {sorted(names)} {how}")

        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for literal, other in _compare_hits(node):
                    names = _literal_strings(literal) & known
                    if _hit(registry, names, other):
                        report(node, names, "compared")
                        break
            elif isinstance(node, ast.Dict):
                names = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)} & known
                context = _dict_context(node, parents)
                if names and context is not None and _hit(registry, names, context, any_two=False):
                    report(node, names, "as dict keys")
            elif isinstance(node, ast.Match):
                for case in node.cases:
                    names = _match_values(case.pattern) & known
                    if _hit(registry, names, node.subject):
                        report(case.pattern, names, "as match cases")
    return found


def mode_string_violations() -> list:
    """Every mode string compared outside its registry in src/gradsim_jax (see the module docstring)."""
    found = []
    for path in sorted((SRC / "gradsim_jax").rglob("*.py")):
        found.extend(violations_in(path.read_text(), str(path.relative_to(SRC))))
    return found


def test_no_mode_string_compared_outside_its_registry():
    found = mode_string_violations()
    assert not found, "mode strings compared outside their registry (ask the registry):\n" + "\n".join(found)


PLANTED = '''
def planted(config, settings, shape, name, kind):
    if config.loss == "rgba":
        pass
    if settings.coverage != "box":
        pass
    channels = {"rgba": 0, "rgb": 1, "silhouette": 2}[config.loss]
    if name in ("softras", "dibr"):
        pass
    match kind:
        case "texture":
            pass
    if shape == "box":  # a body's shape: another concept
        pass
    theta = {"texture": 1}  # a fitted quantity's name: another concept
    if name == "texture":  # a demo's name: another concept
        pass
'''


def test_the_checker_catches_a_planted_violation():
    found = violations_in(PLANTED, "gradsim_jax/sysid/planted.py")
    lines = sorted(int(f.split(":")[1]) for f in found)
    assert lines == [3, 5, 7, 8, 11], found
    assert any("image loss name(s) ['rgb', 'rgba', 'silhouette'] as dict keys" in f for f in found)
    assert any("appearance model name(s) ['texture'] as match cases" in f for f in found)
    # Inside its own registry's module the same code is the registry's business.
    own = violations_in(PLANTED, "gradsim_jax/fit/image_losses.py")
    assert not any("image loss" in f for f in own) and any("coverage model" in f for f in own)


# ----------------------------------------------------------------------------------------------------------
# The registries.
# ----------------------------------------------------------------------------------------------------------


def _tiny_videos():
    rng = np.random.default_rng(0)
    pred = jnp.asarray(rng.uniform(size=(2, 3, 4, 4)), jnp.float32)
    target = jnp.asarray(rng.uniform(size=(2, 3, 4, 4)), jnp.float32)
    return pred, target


def test_every_registered_loss_gives_the_values_of_before():
    from gradsim_jax.sysid.losses import image_loss, residual_channels

    pred, target = _tiny_videos()
    before = {  # the formulas of the name comparisons the registry replaced
        "rgba": jnp.mean(jnp.square(pred - target)),
        "rgb": jnp.mean(jnp.square(pred[..., :3] - target[..., :3])),
        "silhouette": jnp.mean(jnp.square(pred[..., 3] - target[..., 3])),
    }
    channels = {"rgba": pred, "rgb": pred[..., :3], "silhouette": pred[..., 3:]}
    assert set(before) == set(LOSSES) and LOSSES == ("rgba", "rgb", "silhouette")
    for name in LOSSES:
        assert float(image_loss(name, pred, target)) == float(before[name]), name
        assert float(loss_kind(name).reduce(pred, target)) == float(before[name]), name
        np.testing.assert_array_equal(residual_channels(name, pred), channels[name])
        np.testing.assert_array_equal(np.asarray(pred)[..., loss_kind(name).channels], channels[name])
    assert [n for n in LOSSES if IMAGE_LOSSES[n].uses_alpha] == ["rgba", "silhouette"]
    assert [n for n in LOSSES if IMAGE_LOSSES[n].uses_color] == ["rgba", "rgb"]


def test_unknown_loss_names_the_choices():
    from gradsim_jax.sysid.losses import image_loss

    pred, target = _tiny_videos()
    with pytest.raises(ValueError, match=r"unknown loss 'l1'; choose from \('rgba', 'rgb', 'silhouette'\)"):
        image_loss("l1", pred, target)


def test_the_cli_offers_the_registered_losses():
    import argparse

    from gradsim_jax.cli.args import fit_flags

    parser = argparse.ArgumentParser()
    fit_flags(parser)
    action = next(a for a in parser._actions if "--loss" in a.option_strings)
    assert tuple(action.choices) == LOSSES


def test_coverage_models_give_the_cutoffs_and_alternatives_of_before():
    from gradsim_jax.render import RenderSettings

    assert COVERAGE_MODELS == ("softras", "box", "dibr")
    for footprint in (1.0, 2.0):
        for height in (8, 64, 256):
            for name in COVERAGE_MODELS:
                s = RenderSettings(coverage=name, pixel_footprint=footprint)
                sigma = s.sigma_for(height)
                softras = sigma * math.log(1.0 / s.dist_eps - 1.0)
                reach = 0.75 * footprint * 2.0 / height
                before = {"softras": softras, "box": max(softras, reach * reach),
                          "dibr": sigma * math.log(1.0 / s.dist_eps)}[name]
                assert s.cutoff_sq(height) == before, (name, footprint, height)
    assert {n: coverage_model(n).alternative for n in COVERAGE_MODELS} == {
        "softras": "box", "box": "softras", "dibr": "box"}
    assert [n for n in COVERAGE_MODELS if coverage_model(n).area_alpha] == ["box"]
    assert [n for n in COVERAGE_MODELS if coverage_model(n).blends_background] == ["box"]
    assert [n for n in COVERAGE_MODELS if coverage_model(n).kernel is not None] == ["dibr"]
    with pytest.raises(ValueError, match=r"coverage must be one of 'softras', 'box', 'dibr', got 'soft'"):
        RenderSettings(coverage="soft")


def test_appearance_models_cover_the_colour_records():
    from gradsim_jax.render import FaceColors, Texture, VertexColors

    assert APPEARANCE_MODELS == ("face", "vertex", "texture")
    rgb = jnp.ones((2, 3))
    assert appearance_of(None).name == "face"
    assert appearance_of(FaceColors(rgb)).name == "face"
    assert appearance_of(VertexColors(rgb)).name == "vertex"
    assert appearance_of(Texture(jnp.ones((2, 2, 3)), jnp.zeros((2, 2)))).name == "texture"
    assert [n for n in APPEARANCE_MODELS if appearance(n).hand_vjp] == ["face", "vertex"]
    assert [n for n in APPEARANCE_MODELS if appearance(n).per_corner] == ["vertex", "texture"]
    with pytest.raises(TypeError, match="unsupported colors int"):
        appearance_of(3)
    with pytest.raises(ValueError, match=r"unknown appearance 'lit'; choose from \('face', 'vertex', 'texture'\)"):
        appearance("lit")


def test_appearance_tables_and_pair_colours():
    """The columns each model tabulates and the colour it gives a pair at barycentrics (1, 0, 0)."""
    from gradsim_jax.render import FaceColors, Texture, VertexColors

    faces = jnp.asarray([[0, 1, 2]], jnp.int32)
    light = jnp.full((1, 3), 0.5)
    bary = [jnp.ones((1,)), jnp.zeros((1,)), jnp.zeros((1,))]
    vertex_rgb = jnp.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    face = appearance("face").color_table(FaceColors(jnp.asarray([[0.2, 0.4, 0.6]])), light, faces, jnp.float32)
    np.testing.assert_allclose(appearance("face").pair_colors(face, None, bary), [[0.1, 0.2, 0.3]], rtol=1e-6)
    np.testing.assert_allclose(appearance("face").color_table(None, light, faces, jnp.float32), light)
    vertex = appearance("vertex").color_table(VertexColors(vertex_rgb), light, faces, jnp.float32)
    assert vertex.shape == (1, 9)
    np.testing.assert_allclose(appearance("vertex").pair_colors(vertex, None, bary), [[0.5, 0.0, 0.0]])
    tex = Texture(jnp.full((2, 2, 3), 0.8), jnp.asarray([[0.25, 0.25], [0.75, 0.25], [0.25, 0.75]]))
    table = appearance("texture").color_table(tex, light, faces, jnp.float32)
    image = appearance("texture").texture_image(tex, jnp.float32)
    assert table.shape == (1, 9) and image.shape == (2, 2, 3)
    np.testing.assert_allclose(appearance("texture").pair_colors(table, image, bary), [[0.4, 0.4, 0.4]], rtol=1e-6)
