"""Scene files: a TOML description of a recording of a cloth, rigid bodies, soft bodies or any mix of them,
for `gradsim-jax fit`, `render` and the diagnostics.

One trip down: `reader` parses and checks a file against `schema` into a `SceneSpec` (plain data: one typed,
frozen record per section, `sections`, generated from the schema; nothing is built), one reader function per
section turns it into what the rest uses (`reader.SECTION_READERS`: `world`: [scene] and [material]; `fit`:
[fit]; `camera`: [camera]; `render`: [render]; `target`: [target]; `bodies`: [[body]], [[soft_body]],
[[body_push]]; `ode`: [pendulum], [[ball]]; `smoke`: [smoke]; `colliders`: [[collider]]; `build`: [push],
[simulation]; `quantities`: [initial]); `cloth` makes the cloth of [scene] and [material], `build` builds
the pieces into the scene's device trees and the `Experiment`, and `job` assembles what `gradsim-jax fit`
needs (the target video, the fit configuration, the initial guess); `problem` does the same for the
diagnostics.

One table, `SCHEMA`, lists every section and key with its type, default and meaning. The reader validates
against it (unknown section or key, wrong type, missing file or required key: `SceneFileError` naming the
file and the key) and `help_text()` prints it, so the documentation cannot drift from the checks. Relative
paths are relative to the scene file's folder. Example: examples/cloth_scene.toml.

[[body]] (an array of tables: one per rigid body), [[soft_body]] and [[body_push]] (known forces on bodies)
are the sections `ARRAY_SECTIONS`; a single [body] table reads as one body. A scene has a cloth ([scene] grid
or mesh), bodies, soft bodies, or several (one video; each collides with the ground only, never with the
others).

Values in [material] are the scene's known physical values (what `gradsim-jax render` uses to make a
synthetic target); [initial] overrides them as the starting guess of the quantities listed in [fit] free.
Both take a key for every fittable quantity of the registry (`initial_fields`, `material_fields`): the
builders' own keys, and for the others ([[soft_body]] and [[body]] values, masses, densities) a value set
over the built scene. [scene] ground governs the ground of every component.
"""

from gradsim_jax.scenefile.cloth import read_obj
from gradsim_jax.scenefile.job import FitJob, background_warning, load_fit_job, load_target_video, resolve_loss
from gradsim_jax.scenefile.problem import load_problem
from gradsim_jax.scenefile.quantities import check_quantity_value
from gradsim_jax.scenefile.reader import SceneSpec, load_scene, read_scene_file
from gradsim_jax.scenefile.schema import (ARRAY_SECTIONS, MATERIAL_QUANTITIES, SCHEMA, Field, SceneFileError, help_text,
                                          initial_fields, material_fields)

__all__ = ["ARRAY_SECTIONS", "MATERIAL_QUANTITIES", "SCHEMA", "Field", "FitJob", "SceneFileError", "SceneSpec",
           "background_warning", "check_quantity_value", "help_text", "initial_fields", "load_fit_job",
           "load_problem", "load_scene", "load_target_video", "material_fields", "read_obj", "read_scene_file",
           "resolve_loss"]
