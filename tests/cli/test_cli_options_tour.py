"""A tour of the command line: every command, demo, option and choice of `gradsim-jax` in one table.

`TOUR` holds one invocation per row (a tiny scene: the 2 x 2 cloth at 16 px over 3 frames, or a demo at 8 to 16
px over 3 frames; 1 or 2 iterations), run through `cli.main` and checked for exit status 0 and what it must
print or write. Flags that do not conflict share a row, and the rows on the scene file share its compiled
programs (the suite's persistent compilation cache): `fit --restarts` refits with the `fit` row's settings.

`test_every_option_is_toured` walks the real parser and fails when a subcommand, an option or a choice is in
no row, so an option added to the parser needs a row before the suite passes; and when one is in no quick
row, unless a quick test elsewhere runs it (`ELSEWHERE`, by node id, checked to exist and not to be slow) or
its subcommand is a demo whose rows are slow and name (`like`) the quick row of a demo with the same runner
(`cli.demo.runner_of`: the rigid, FEM, contact, ODE and control demos each share one). Every runner has a
quick row; the slow rows are the other members of a family, each compiling a scene of its own, 17-31 s of CPU
cold; `make test-all` runs them. The `fit --restarts` row is the one that would have caught `jax.devicecount()` (commit 97f9f76).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import math
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from gradsim_jax.cli import build_parser, main
from gradsim_jax.cli.app import subcommands
from gradsim_jax.cli.args import fit_flags, force_flag, progress_flags
from gradsim_jax.cli.demo import runner_of
from gradsim_jax.scenefile import load_scene

from cli_scenes import SMALL_CLOTH, small_run

ROOT = Path(__file__).resolve().parents[2]
THIS = "tests/cli/test_cli_options_tour.py"

#: The scene file of the `fit`, `render` and diagnostics rows: the 2 x 2 cloth pinned along its left edge,
#: 16 x 16 px, 3 frames, its mass fitted from a start 50 % heavy.
SCENE = SMALL_CLOTH + small_run(3) + """
[material]
mass = 0.02

[initial]
mass = 0.03
"""


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the tour.

    argv: the words after `gradsim-jax`, {scene}, {target}, {target_rgb}, {mask}, {picture}, {reference}
      (`inputs`) and
      {out} (a fresh folder) filled in; check(out, printed): what the run wrote to {out} and printed;
    first: a run before it in the same {out} (the checkpoint a --resume continues);
    slow: why the row is `slow` (None: it runs in `make test`);
    like: for a slow demo row, the quick row of a demo with the same runner (`cli.demo.runner_of`), which runs
      its code in `make test`."""

    argv: str
    check: Callable[[Path, str], None]
    first: str | None = None
    slow: str | None = None
    like: str | None = None


def finite_report(name="report.json", *keys):
    """A check: OUT/name holds numbers, all finite, and has `keys`."""
    def check(out: Path, printed: str) -> None:
        report = json.loads((out / name).read_text())
        numbers = _numbers(report)
        assert numbers and all(math.isfinite(x) for x in numbers), name
        for key in keys:
            assert key in report, (key, sorted(report))
    return check


def _numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def wrote(*names):
    """A check: each of `names` is a non-empty file in OUT."""
    def check(out: Path, printed: str) -> None:
        for name in names:
            assert (out / name).stat().st_size > 0, name
    return check


def printed(*words):
    """A check: the run printed each of `words`."""
    def check(out: Path, text: str) -> None:
        for word in words:
            assert word in text, (word, text[-2000:])
    return check


def both(*checks):
    def check(out: Path, text: str) -> None:
        for c in checks:
            c(out, text)
    return check


def resumed(out: Path, text: str) -> None:
    """A check: the report says the run continued a checkpoint made with other settings (--resume-anyway)."""
    resume = json.loads((out / "report.json").read_text())["resume"]
    assert resume["from_iteration"] >= 1 and resume["resume_anyway"] and resume["differences"], resume


DEMO_OUTPUTS = ("target.gif", "initial.gif", "fitted.gif", "comparison.mp4", "loss.png", "params.png",
                "report.json", "report.html")
CONTROL_OUTPUTS = ("untrained.gif", "trained.gif", "comparison.mp4", "target.png", "loss.png", "report.json")


def fitted_demo(*free):
    """A check of a demo that fits through `demo._run_demo`: its outputs and a finite report of `free`."""
    def check(out: Path, text: str) -> None:
        both(wrote(*DEMO_OUTPUTS), finite_report("report.json", "estimated", "identifiability"))(out, text)
        assert json.loads((out / "report.json").read_text())["free"] == list(free)
    return check


def reported_in_full(out: Path, text: str) -> None:
    """A check of `demo cloth`'s report and summary: versions, identifiability, errors, where it wrote."""
    report = json.loads((out / "report.json").read_text())
    assert report["versions"]["jax"] and "condition_number" in report["identifiability"]
    for key in ("true", "initial", "relative_error", "iterations", "wall_time_s"):
        assert key in report, key
    assert "relative error" in text and str(out.resolve()) in text
    assert "report.html, report.json" in text and "(open report.html)" in text  # the page to open, named


FIT = "fit {scene} --target {target} --out {out} --no-progress"
#: The `fit` row's settings, which its --resume and the --restarts row's refit share (the same programs).
FIT_FLAGS = ("--mask {mask} --true --blur off --edge-model fixed --iterations 2 --learning-rate 0.05 --polish 1 "
             "--rounds 1 --round-iterations 1 --loss rgba --frame-stride 1 --horizon 2 --clip mass=1.0 "
             "--checkpoint-every 1 --force")
#: What every demo row gives: 8 px, 3 frames, no progress bar.
TINY = "--size 8 --frames 3 --no-progress --out {out}"
#: The flags of a demo that fits through `demo._run_demo` (cloth and the table demos).
FITTING = ("--perturb 0.3 0.5 --seed 1 --iterations 1 --learning-rate 0.05 --polish 0 --rounds 1 "
           "--round-iterations 1 --frame-stride 1 --horizon 2 --checkpoint-every 1 --force " + TINY)
#: The run after FITTING in the same OUT: its checkpoint continued for one more iteration (the settings
#: differ: --resume-anyway continues regardless).
CONTINUED = FITTING.replace("--iterations 1", "--iterations 2") + " --resume --resume-anyway"


def resuming(demo: str) -> dict[str, str]:
    """argv= and first= of a row whose run continues the checkpoint of a first run with the same settings but one
    more iteration (--resume-anyway: the iteration count differs), so that both compile the same programs
    (a learning rate or a smoothness is a constant of the compiled step: one that differed, 7 s more)."""
    first = f"{demo} --iterations 1 --checkpoint-every 1 --force " + TINY
    return {"argv": first.replace("--iterations 1", "--iterations 2") + " --resume --resume-anyway", "first": first}


SAME_RUNNER = "its runner runs in `make test` with another demo of its family; a scene of its own: {} s of CPU cold"

TOUR: dict[str, Row] = {
    # --- render, fit and the diagnostics on the scene file --------------------------------------------------
    "render": Row("render {scene} --out {out}/target.gif --force", wrote("target.gif")),
    # The --resume continues the first run for more iterations: --resume-anyway goes on regardless.
    "fit": Row(FIT + " " + FIT_FLAGS.replace("--iterations 2", "--iterations 3") + " --resume --resume-anyway",
               both(finite_report("report.json", "estimated", "relative_error"), wrote("fitted.gif"), resumed),
               first=FIT + " " + FIT_FLAGS),
    "fit --window": Row(FIT.replace("{target}", "{target_rgb}") + " --key-color 1 1 1 --loss rgb --blur auto "
                        "--edge-model auto --window 2 --shooting truncated --iterations 2 --polish 0",
                        finite_report("report.json", "estimated")),
    "fit --restarts": Row(FIT + " " + FIT_FLAGS + " --restarts 2 --restart-spread 2 --seed 1 --batch-mode map",
                          both(finite_report("report.json", "restarts"), printed("<- best"))),
    "fit --shooting multiple": Row(FIT + " --blur 0.5 --window 2 --shooting multiple "
                                   "--iterations 2 --polish 0", finite_report("report.json", "estimated"),
                                   slow="the start states' programs: 70 s of CPU cold"),
    # predict after the fit: the scene's 4 frames and 2 more (unscored), against the reference positions.
    "predict": Row("predict {scene} --fit {out} --target {target} --mask {mask} --key-color 1 1 1 --frames 4 "
                   "--reference {reference} --out {out}/predicted",
                   both(finite_report("predicted/report.json", "prediction"), printed("held-out frames")),
                   first=FIT + " " + FIT_FLAGS),
    "gradcheck": Row("gradcheck {scene} --target {target} --mask {mask} --perturb 0.1 --seed 1 --out {out} "
                     "--force --ad-rtol 1 --fd-rtol 1 --f32-rtol 1 --no-float32",
                     both(finite_report("gradcheck.json"), printed("all gradients agree"))),
    "horizon": Row("horizon {scene} --target {target_rgb} --key-color 1 1 1 --tol 0.5 --mode reverse --out {out}",
                   both(wrote("horizon.png"), finite_report("horizon.json"))),
    "landscape": Row("landscape {scene} --vary mass --span 0.2 --points 2 --batch 2 --out {out}",
                     both(wrote("landscape.png"), finite_report("landscape.json"))),
    # --- the demos that fit through `demo._run_demo` -----------------------------------------------------------
    "demo cloth": Row("demo cloth --estimate mass,stiffness --cells 2 --no-push --loss silhouette " + CONTINUED,
                      both(fitted_demo("mass", "stiffness"), resumed, reported_in_full),
                      first="demo cloth --estimate mass,stiffness --cells 2 --no-push --loss silhouette " + FITTING),
    "demo rigid-material": Row("demo rigid-material --estimate body_mu --loss rgb " + FITTING,
                               fitted_demo("body_mu")),
    "demo rigid-mass": Row("demo rigid-mass " + FITTING, fitted_demo("body_mass"), slow=SAME_RUNNER.format(18),
                           like="demo rigid-material"),
    "demo rigid-restitution": Row("demo rigid-restitution " + FITTING, fitted_demo("restitution"),
                                  slow=SAME_RUNNER.format(30), like="demo rigid-material"),
    "demo fem-material": Row("demo fem-material --estimate fem_mu " + FITTING, fitted_demo("fem_mu")),
    "demo fem-mass": Row("demo fem-mass --density-first 1 " + FITTING, fitted_demo("particle_mass"),
                         slow=SAME_RUNNER.format(17), like="demo fem-material"),
    "demo stack": Row("demo stack --estimate body_mass " + FITTING, fitted_demo("body_mass")),
    "demo drape": Row("demo drape --estimate collider_mu " + FITTING, fitted_demo("collider_mu"),
                      slow=SAME_RUNNER.format(27), like="demo stack"),
    "demo lift": Row("demo lift --estimate mass " + FITTING, fitted_demo("mass"), slow=SAME_RUNNER.format(28),
                     like="demo stack"),
    "demo pendulum": Row("demo pendulum --estimate pendulum_length " + FITTING, fitted_demo("pendulum_length"),
                         slow=SAME_RUNNER.format(22), like="demo bounce"),
    "demo double-pendulum": Row("demo double-pendulum --estimate pendulum_length " + FITTING,
                                fitted_demo("pendulum_length"), slow=SAME_RUNNER.format(21), like="demo bounce"),
    "demo bounce": Row("demo bounce --estimate ball_speed " + FITTING, fitted_demo("ball_speed")),
    # --- the demos with runners of their own ------------------------------------------------------------------
    "demo cloth-control": Row(**resuming("demo cloth-control --learning-rate 0.1 --seed 1"),
                              check=both(wrote(*DEMO_OUTPUTS), finite_report("report.json", "final_position_error"))),
    "demo rigid-shape": Row(**resuming("demo rigid-shape --smoothness 0.1 --seed 1"),
                            check=both(wrote(*DEMO_OUTPUTS), finite_report())),
    "demo control-fem": Row(**resuming("demo control-fem --learning-rate 0.05 --random-policies 1 --seed 1"),
                            check=both(wrote(*CONTROL_OUTPUTS), finite_report())),
    **{f"demo {name}": Row(**resuming(f"demo {name} --learning-rate 0.05 --random-policies 1 --seed 1"),
                           check=both(wrote(*CONTROL_OUTPUTS), finite_report()), slow=SAME_RUNNER.format(cpu),
                           like="demo control-fem")
       for name, cpu in (("control-cloth", 28), ("control-walker", 27), ("control-jellyfish", 31))},
    "demo smoke-buoyancy": Row("demo smoke-buoyancy --estimate smoke_buoyancy --cells 8 --frames 3 --size 8 "
                               "--offset 0.3 --iterations 1 --learning-rate 0.1 --polish 1 --frame-stride 1 "
                               "--no-progress --out {out}",
                               both(wrote(*DEMO_OUTPUTS), finite_report(), printed("  converged: "))),
    "demo smoke-shape": Row("demo smoke-shape --target {picture} --cells 8 --frames 2 --iterations 1 --no-progress "
                            "--out {out}", both(wrote("target.png", "frames.png"), finite_report()),
                            first="demo smoke-shape --text o --cells 8 --frames 2 --iterations 1 --learning-rate 0.1 "
                                  "--smoothness 0.1 --no-progress --out {out}"),
    "demo texture": Row("demo texture --size 16 --texels 2 --iterations 1 --learning-rate 0.1 --rasterizer dibr "
                        "--no-progress --out {out}", both(wrote("texture.png"), finite_report()),
                        first="demo texture --size 16 --texels 2 --iterations 1 --rasterizer softras --no-progress "
                              "--out {out}"),
    "demo shape": Row("demo shape --size 16 --subdivisions 1 --iterations 1 --learning-rate 0.01 --laplacian 1 "
                      "--edge-length 1 --rasterizer dibr --no-progress --out {out}",
                      both(wrote("shape.png"), finite_report()),
                      first="demo shape --size 16 --subdivisions 1 --iterations 1 --rasterizer softras "
                            "--no-progress --out {out}"),
}

MULTIPLE_SHOOTING = ("tests/sysid/test_sysid_windowed.py::"
                     "test_continuity_is_zero_when_the_start_states_are_the_run_and_grows_with_a_gap")
#: Options and choices that a quick test elsewhere runs, by node id (each checked to exist and not to be
#: slow): (path..., option[, choice]), ("demo", option[, choice]) for every demo, (option,) for every parser.
ELSEWHERE = {
    ("-h",): THIS + "::test_every_help_renders_without_a_percent_escape",
    ("--help",): THIS + "::test_every_help_renders_without_a_percent_escape",
    ("--version",): "tests/cli/test_cli_demo.py::test_version",
    # Multi-host jobs cannot run on one machine: the arguments are checked before anything starts.
    ("fit", "--coordinator"): "tests/cli/test_cli_restarts.py::test_bad_restart_and_host_flags_fail_before_running",
    ("fit", "--num-processes"): "tests/cli/test_cli_restarts.py::test_bad_restart_and_host_flags_fail_before_running",
    ("fit", "--process-id"): "tests/cli/test_cli_restarts.py::test_bad_restart_and_host_flags_fail_before_running",
    ("fit", "--distributed"): "tests/cli/test_cli_restarts.py::test_bad_restart_and_host_flags_fail_before_running",
    # The command hands --batch-mode to `fit_restarts` (the `map` row above); the modes are its own.
    ("fit", "--batch-mode", "vmap"): "tests/fit/test_fit_batched.py::test_each_member_is_its_own_fit",
    ("fit", "--batch-mode", "sequential"): "tests/fit/test_fit_batched.py::test_each_member_is_its_own_fit",
    # --shooting reaches the FitConfig the `truncated` row fills; multiple shooting's terms are the library's.
    ("fit", "--shooting", "multiple"): MULTIPLE_SHOOTING,
    # The fitting demos hand --loss, --window and --shooting to the FitConfig that `fit` fills too (a windowed
    # demo would compile programs of its own: 10 s more).
    ("demo", "--loss", "rgba"): THIS + "::test_tour[fit]",
    ("demo", "--loss", "rgb"): THIS + "::test_tour[fit --window]",
    ("demo", "--window"): THIS + "::test_tour[fit --window]",
    ("demo", "--shooting"): THIS + "::test_tour[fit --window]",
    # fit silhouettes in the `demo cloth` row; the modes of `gradient_horizon` are its own (reverse: the row).
    ("fit", "--loss", "silhouette"): THIS + "::test_tour[demo cloth]",
    ("horizon", "--mode", "forward"):
        "tests/diagnostics/test_diagnostics_horizon.py::test_marked_horizon_agrees_with_the_lyapunov_prediction",
    ("horizon", "--mode", "auto"):
        "tests/diagnostics/test_diagnostics_horizon.py::test_smooth_motion_stays_informative_and_outputs_are_written",
}


# ---------------------------------------------------------------------------------------------------
# The runs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The scene file, its target (a folder of RGBA PNGs rendered from [material]), the target's alpha as a
    mask folder and its colours over white as a folder of RGB PNGs; a picture for demo smoke-shape."""
    import imageio.v2 as imageio

    folder = tmp_path_factory.mktemp("tour")
    scene = folder / "scene.toml"
    scene.write_text(SCENE)
    target = folder / "target"
    assert main(["render", str(scene), "--out", str(target)]) == 0
    mask, rgb = folder / "mask", folder / "target_rgb"
    mask.mkdir()
    rgb.mkdir()
    for png in sorted(target.glob("*.png")):
        rgba = np.asarray(imageio.imread(png))
        imageio.imwrite(mask / png.name, rgba[..., 3])
        alpha = rgba[..., 3:].astype(np.float32) / 255.0
        imageio.imwrite(rgb / png.name, np.round(rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8))
    picture = folder / "picture.png"
    square = np.zeros((16, 16, 3), np.uint8)
    square[4:12, 4:12] = 255
    imageio.imwrite(picture, square)
    reference = folder / "reference.npy"  # the cloth's 9 vertices where the scene starts them, held
    spec = load_scene(scene)
    np.save(reference, np.repeat(np.asarray(spec.experiment().state0.particles.x)[None], 4, axis=0))
    return {"scene": scene, "target": target, "mask": mask, "target_rgb": rgb, "picture": picture,
            "reference": reference}


def _argv(text: str, **values) -> list[str]:
    return [word.format(**values) for word in text.split()]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if r.slow else n
                                  for n, r in TOUR.items()])
def test_tour(name, inputs, tmp_path, capsys):
    row = TOUR[name]
    values = {**inputs, "out": tmp_path / "out"}
    if row.first is not None:
        assert main(_argv(row.first, **values)) == 0, capsys.readouterr().err
    assert main(_argv(row.argv, **values)) == 0, capsys.readouterr().err
    row.check(values["out"], capsys.readouterr().out)


# ---------------------------------------------------------------------------------------------------
# What the tour covers


def _parsers(parser, path=()):
    """(path, parser) of `parser` and of every subcommand below it: ((), top), (("fit",), fit), ..."""
    yield path, parser
    for name, sub in subcommands(parser).items():
        yield from _parsers(sub, (*path, name))


def _options(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _split(text: str):
    """(parser path, its parser, the words after the subcommands) of one invocation."""
    words, parser, path = text.split(), build_parser(), ()
    while words and words[0] in subcommands(parser):
        parser, path, words = subcommands(parser)[words[0]], (*path, words[0]), words[1:]
    return path, parser, words


@functools.cache
def _pools() -> tuple[tuple[frozenset, frozenset], ...]:
    """Groups of parsers (paths) whose shared options one function reads for all of them, so that a row of
    any member tours them for every member: (members, options).

    The demos that fit through `demo._run_demo` (cloth and the table demos) read the flags of `fit_flags`,
    `progress_flags` and `force_flag` in `demo._config`; gradcheck, horizon and landscape read the options
    of `diagnostics._common` in `diagnostics._load`."""
    from gradsim_jax.cli import diagnostics

    def flags(*adders) -> frozenset[str]:
        parser = argparse.ArgumentParser(add_help=False)
        for add in adders:
            add(parser)
        return frozenset(_options(parser))

    shared = flags(fit_flags, progress_flags, force_flag)
    demos = subcommands(subcommands(build_parser())["demo"])
    fitting = frozenset(("demo", n) for n, p in demos.items() if shared <= _options(p))
    common = flags(lambda p: diagnostics._common(p, "x"))
    return (fitting, shared), (frozenset((n,) for n in diagnostics.COMMANDS), common)


def _toured(quick: bool) -> dict[tuple[str, ...], dict[str, set[str]]]:
    """For each parser path the rows reach (`quick`: the quick rows only), the option strings given there,
    each with the values given to it (the choices toured)."""
    toured: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for row in TOUR.values():
        if quick and row.slow:
            continue
        for text in filter(None, (row.first, row.argv)):
            path, parser, words = _split(text)
            toured.setdefault(path, {})
            for i, word in enumerate(words):
                if word in _options(parser):
                    toured[path].setdefault(word, set()).add(words[i + 1] if i + 1 < len(words) else "")
    return toured


def _given(toured, path, option) -> set[str] | None:
    """The values the rows give `option` of the parser at `path` or of a member of its pool; None if none."""
    found = [toured.get(path, {}).get(option)]
    for members, options in _pools():
        if path in members and option in options:
            found += [toured.get(m, {}).get(option) for m in members]
    found = [f for f in found if f is not None]
    return set().union(*found) if found else None


def _untoured(toured) -> list[tuple[str, ...]]:
    """The subcommands (path), options (path + option) and choices (path + option + choice) of the parser
    that no row of `toured` nor ELSEWHERE tours."""
    reached = {path[:i] for path in toured for i in range(1, len(path) + 1)}
    missing = []
    for path, parser in _parsers(build_parser()):
        missing += [(*path, name) for name in subcommands(parser) if (*path, name) not in reached]
        for action in parser._actions:
            for option in action.option_strings:
                if {(*path, option), (path[:1] + (option,)), (option,)} & set(ELSEWHERE):
                    continue
                given = _given(toured, path, option)
                if given is None:
                    missing.append((*path, option))
                elif action.choices is not None:
                    missing += [(*path, option, c) for c in action.choices if c not in given
                                and (*path, option, c) not in ELSEWHERE and (path[0], option, c) not in ELSEWHERE]
    return missing


def _slow_mark(node: str) -> bool | None:
    """Whether the test `node` (file::function, or a row of this tour) is marked slow, on itself, its module
    or one of its parameter sets; None when there is no such test. Read from the source: nothing is run."""
    file, function = node.split("::")
    if file == THIS and function.startswith("test_tour["):
        row = TOUR.get(function[len("test_tour["):-1])
        return None if row is None else row.slow is not None
    tree = ast.parse((ROOT / file).read_text())
    module_marks = [ast.unparse(n.value) for n in tree.body if isinstance(n, ast.Assign)
                    and any(getattr(t, "id", None) == "pytestmark" for t in n.targets)]
    for found in tree.body:
        if isinstance(found, ast.FunctionDef) and found.name == function:
            return any("mark.slow" in text for text in [ast.unparse(d) for d in found.decorator_list] + module_marks)
    return None


def test_every_option_is_toured():
    """Every subcommand, option string and choice of the parser is in a row of TOUR or in ELSEWHERE; in a
    quick row, unless all of its subcommand's rows are slow (each saying why)."""
    assert not _untoured(_toured(quick=False)), f"in no row of the tour: {_untoured(_toured(quick=False))}"
    everywhere, quick = _toured(quick=False), _toured(quick=True)
    slow_only = set(everywhere) - set(quick)
    assert not [p for p in slow_only if p[0] != "demo"], "a command other than a demo has slow rows only"
    for name, row in TOUR.items():
        if name.startswith("demo ") and row.slow:  # its runner runs in make test, with a demo of its family
            like = TOUR[row.like] if row.like in TOUR else None
            assert like is not None and like.slow is None, f"{name}: like= names no quick row ({row.like})"
            assert runner_of(name.split()[1]) is runner_of(row.like.split()[1]), f"{name}: another runner"
    missing = [m for m in _untoured(quick) if not any(m[:len(p)] == p for p in slow_only)]
    assert not missing, f"in no quick row of the tour: {missing}"
    for node in set(ELSEWHERE.values()):
        assert _slow_mark(node) is False, f"{node}: no such test, or it is marked slow"


def test_the_tour_check_notices_what_is_missing(monkeypatch):
    """The check above fails for a row taken out, a choice no row gives, and a slow test named in ELSEWHERE."""
    monkeypatch.delitem(TOUR, "fit --restarts")
    assert ("fit", "--restarts") in _untoured(_toured(quick=True))
    monkeypatch.setitem(TOUR, "horizon", dataclasses.replace(TOUR["horizon"], argv=TOUR["horizon"].argv.replace(
        "--mode reverse", "--mode forward")))
    assert ("horizon", "--mode", "reverse") in _untoured(_toured(quick=True))
    assert _slow_mark("tests/cli/test_cli_restarts.py::test_restarts_find_the_truth_where_a_single_start_stops_"
                      "in_a_local_minimum") is True
    assert _slow_mark(THIS + "::test_tour[fit --shooting multiple]") is True
    assert _slow_mark(THIS + "::no_such_test") is None


# ---------------------------------------------------------------------------------------------------
# Help texts


def test_every_help_renders_without_a_percent_escape(capsys):
    """`--help` of every (sub)command renders (argparse %-formats help strings: a stray "%" breaks them) and
    shows no "%%" (a description, which argparse does not format, written as if it were)."""
    for path, _ in _parsers(build_parser()):
        with pytest.raises(SystemExit) as e:
            main([*path, "--help"])
        assert e.value.code == 0, path
        text = capsys.readouterr().out
        assert text.startswith("usage: gradsim-jax") and "%%" not in text, (path, text)
