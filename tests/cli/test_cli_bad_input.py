"""Bad input stops at the door: a clean `gradsim-jax: error: ...` naming the file, key or option and exit
code 2, never a traceback from numpy, JAX, imageio or pickle; outputs are written atomically; `--resume`
refuses a checkpoint made for another target, scene or settings unless `--resume-anyway`."""

import contextlib
import io
import json
import os
import re

import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.cli import build_parser, main
from gradsim_jax.cli.app import subcommands
from gradsim_jax.fit import checkpoint_path, load_checkpoint
from gradsim_jax.render.video import load_target, write_gif
from gradsim_jax.scenefile import SceneFileError, load_scene

from cli_scenes import SMALL_CLOTH, small_run, write_scene

SCENE = SMALL_CLOTH + small_run(3) + """
iterations = 2
polish = 0
"""
QUIET = ["--no-progress"]


def write(folder, text=SCENE, name="scene.toml"):
    return write_scene(folder, text, name)


def noise_gif(path, frames=4, seed=0):
    """A tiny target that needs no rendering (what matters here is that it reads)."""
    video = np.random.default_rng(seed).uniform(0.0, 1.0, (frames, 16, 16, 3)).astype(np.float32)
    return write_gif(path, video, fps=60.0)


def clean_error(capsys, *words):
    err = capsys.readouterr().err
    assert "Traceback" not in err and "gradsim-jax: error:" in err, err
    for word in words:
        assert word in err, (word, err)
    return err


@pytest.fixture
def no_simulation(monkeypatch):
    """Fail the test if anything gets as far as simulating (compiling): the error must come first."""
    def refuse(*args, **kwargs):
        raise AssertionError("simulated before the bad input was reported")

    from gradsim_jax.sysid import runner

    for module in (sysid, runner):  # the package's names and the ones `sysid.run` calls
        monkeypatch.setattr(module, "simulate_video", refuse)
        monkeypatch.setattr(module, "identify", refuse)


# ---------------------------------------------------------------------------------------------------
# Output paths


def test_fit_out_under_a_regular_file_fails_before_fitting(tmp_path, capsys, no_simulation):
    (tmp_path / "afile").write_text("")
    target = noise_gif(tmp_path / "t.gif")
    out = tmp_path / "afile" / "run"
    assert main(["fit", str(write(tmp_path)), "--target", str(target), "--out", str(out), *QUIET]) == 2
    clean_error(capsys, str(out))


def test_demo_out_under_a_regular_file_fails_before_fitting(tmp_path, capsys, no_simulation):
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "run"
    assert main(["demo", "cloth", "--out", str(out), "--size", "16", "--frames", "3", "--cells", "2", *QUIET]) == 2
    clean_error(capsys, str(out))


@pytest.mark.parametrize("name", ["afile/x.gif", "afile/x.mp4", "afile/frames", "folder.gif", "afile"])
def test_render_out_unwritable_fails_before_simulating(tmp_path, capsys, no_simulation, name):
    (tmp_path / "afile").write_text("")
    (tmp_path / "folder.gif").mkdir()
    out = tmp_path / name
    assert main(["render", str(write(tmp_path)), "--out", str(out)]) == 2
    clean_error(capsys, str(out))


def test_render_refuses_an_unknown_video_suffix(tmp_path, capsys, no_simulation):
    assert main(["render", str(write(tmp_path)), "--out", str(tmp_path / "x.avi")]) == 2
    clean_error(capsys, "x.avi", ".gif", ".mp4")
    assert not (tmp_path / "x.avi").exists()


# ---------------------------------------------------------------------------------------------------
# Scene-file values


@pytest.mark.parametrize("old, new, words", [
    ("iterations = 2", "iterations = -3", ["[fit] iterations", "-3", "0 or more"]),
    ("polish = 0", "polish = -1", ["[fit] polish", "-1"]),
    ("polish = 0", "polish = 0\nframe_stride = 0", ["[fit] frame_stride", "at least 1"]),
    ("polish = 0", "polish = 0\nhorizon = 0", ["[fit] horizon", "at least 1"]),
    ("polish = 0", "polish = 0\nrounds = 0", ["[fit] rounds", "at least 1"]),
    ("polish = 0", "polish = 0\nround_iterations = 0", ["[fit] round_iterations", "at least 1"]),
    ("polish = 0", "polish = 0\nlearning_rate = -0.05", ["[fit] learning_rate", "positive", "-0.05"]),
    ("polish = 0", "polish = 0\nlearning_rate = 0.0", ["[fit] learning_rate", "positive"]),
    ("polish = 0", "polish = 0\nlearning_rate = nan", ["[fit] learning_rate", "positive"]),
    ("polish = 0", "polish = 0\n[initial]\nmass = -0.01", ["[initial] mass", "positive", "-0.01"]),
    ("polish = 0", "polish = 0\n[initial]\nmass = 0.0", ["[initial] mass", "positive"]),
    ("polish = 0", "polish = 0\n[initial]\ntri_ke = inf", ["[initial] tri_ke", "positive"]),
])
def test_bad_fit_values_are_refused_when_the_scene_is_read(tmp_path, old, new, words):
    path = write(tmp_path, SCENE.replace(old, new))
    with pytest.raises(SceneFileError) as e:
        load_scene(path)
    for word in [str(path), *words]:
        assert word in str(e.value), (word, str(e.value))


def test_negative_iterations_end_cleanly_without_fitting(tmp_path, capsys, no_simulation):
    path = write(tmp_path, SCENE.replace("iterations = 2", "iterations = -3"))
    target = noise_gif(tmp_path / "t.gif")
    assert main(["fit", str(path), "--target", str(target), "--out", str(tmp_path / "run"), *QUIET]) == 2
    clean_error(capsys, "[fit] iterations")


@pytest.mark.parametrize("old, new, words", [
    ("frames = 3", "frames = 0", ["[simulation] frames", "at least 1", "got 0"]),
    ("frames = 3", "frames = -2", ["[simulation] frames", "at least 1", "got -2"]),
    ("height = 16", "height = 16\ntile_capacity = 0", ["[render] tile_capacity", "at least 1", "got 0"]),
    ("height = 16", "height = 16\npixel_capacity = -1", ["[render] pixel_capacity", "at least 1"]),
    ("height = 16", 'height = 16\ncoverage = "dib-r"', ["[render] coverage", '"softras" or "dibr"', "dib-r"]),
    ("[fit]", "[material]\nmass = 0.0\n[fit]", ["[material] mass", "positive", "pinned"]),
    ("[fit]", "[material]\nmass = -0.01\n[fit]", ["[material] mass", "positive", "-0.01"]),
    ("[fit]", "[push]\nforce = [0.0, 0.1, 0.0]\nparticles = [4]\nframes = 40\n[fit]",
     ["[push] frames = 40", "0.667 s", "3 frames", "0.05 s"]),
    ("[fit]", "[push]\nforce = [0.0, 0.1, 0.0]\nparticles = [4]\nframes = -1\n[fit]", ["[push] frames", "-1"]),
    ("[fit]", "[camera]\nview_angle = 0.0\n[fit]", ["view_angle", "(0, 90)"]),
    ("[fit]", "[camera]\nview_angle = 90.0\n[fit]", ["view_angle", "(0, 90)"]),
])
def test_bad_scene_values_say_what_is_wrong_and_what_is_allowed(tmp_path, old, new, words):
    path = write(tmp_path, SCENE.replace(old, new))
    with pytest.raises(SceneFileError) as e:
        load_scene(path).experiment()
    for word in [str(path), *words]:
        assert word in str(e.value), (word, str(e.value))


def test_a_one_frame_target_is_not_reported_as_a_missing_frame_count(tmp_path):
    spec = load_scene(write(tmp_path, SCENE.replace("frames = 3\n", "")))
    with pytest.raises(SceneFileError, match=r"1 frame.*at least 2"):
        spec.experiment(frames=0)
    with pytest.raises(SceneFileError, match=r"\[simulation\] frames is needed"):
        spec.experiment()


# ---------------------------------------------------------------------------------------------------
# Command-line options


@pytest.mark.parametrize("option, value, words", [
    ("--checkpoint-every", "0", ["--checkpoint-every", "at least 1"]),
    ("--checkpoint-every", "-5", ["--checkpoint-every", "at least 1"]),
    ("--iterations", "-3", ["--iterations", "0 or more"]),
    ("--polish", "-1", ["--polish", "0 or more"]),
    ("--frame-stride", "0", ["--frame-stride", "at least 1"]),
    ("--horizon", "0", ["--horizon", "at least 1"]),
    ("--learning-rate", "-0.1", ["--learning-rate", "positive"]),
    ("--learning-rate", "0", ["--learning-rate", "positive"]),
    ("--learning-rate", "nan", ["--learning-rate", "positive"]),
])
@pytest.mark.parametrize("command", ["fit", "demo"])
def test_bad_options_are_usage_errors(tmp_path, capsys, no_simulation, option, value, words, command):
    args = (["fit", str(write(tmp_path)), "--target", "t.gif"] if command == "fit"
            else ["demo", "cloth", "--size", "16"])
    with pytest.raises(SystemExit) as e:
        main([*args, "--out", str(tmp_path / "run"), option, value, *QUIET])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


@pytest.mark.parametrize("argv, prog, hint", [
    (["fit", "{scene}", "--targt", "t.gif"], "gradsim-jax fit", "(did you mean --target?)"),
    (["demo", "pendulum", "--iteratoins", "3"], "gradsim-jax demo pendulum", "(did you mean --iterations?)"),
    (["render", "{scene}", "--out", "x.gif", "bogus"], "gradsim-jax render", None),
])
def test_an_unknown_option_shows_the_usage_of_its_subcommand(tmp_path, capsys, no_simulation, argv, prog, hint):
    scene = str(write(tmp_path))
    with pytest.raises(SystemExit) as e:
        main([a.format(scene=scene) for a in argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {prog} "), err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"{prog}: error: unrecognized arguments: "), last
    assert hint is None or last.endswith(hint), last


@pytest.mark.parametrize("option", ["--target", "--mask"])
@pytest.mark.parametrize("command", ["fit", "gradcheck"])
def test_a_missing_target_or_mask_names_its_option(tmp_path, capsys, no_simulation, option, command):
    given = {"--target": str(noise_gif(tmp_path / "t.gif")), "--mask": None}
    given[option] = str(tmp_path / "nosuch")
    argv = [command, str(write(tmp_path)), "--out", str(tmp_path / "run")]
    argv += [word for name, value in given.items() if value is not None for word in (name, value)]
    assert main(argv) == 2
    err = clean_error(capsys, f"{option} {tmp_path / 'nosuch'}")
    assert len(err.strip().splitlines()) == 1, err


def test_an_unknown_demo_quantity_suggests_and_lists_the_demos_own(tmp_path, capsys, no_simulation):
    assert main(["demo", "cloth", "--estimate", "masss", "--out", str(tmp_path / "run"), *QUIET]) == 2
    err = clean_error(capsys, "--estimate", "unknown quantity 'masss'", "did you mean 'mass'?", "stiffness",
                      "velocity")
    assert "body_mass" not in err and "pendulum_length" not in err, err  # no other demo's quantities
    assert main(["demo", "stack", "--estimate", "mas", "--out", str(tmp_path / "run"), *QUIET]) == 2
    err = clean_error(capsys, "did you mean 'body_mass'?", "body_mu")
    assert "stiffness" not in err, err


def test_an_unknown_quantity_of_a_scene_file_suggests_the_nearest(tmp_path, capsys, no_simulation):
    path = write(tmp_path, SCENE.replace('free = ["mass"]', 'free = ["stifness"]'))
    assert main(["fit", str(path), "--target", str(noise_gif(tmp_path / "t.gif")), "--out", str(tmp_path / "run"),
                 *QUIET]) == 2
    clean_error(capsys, "[fit] free", "unknown quantity 'stifness'", "did you mean 'stiffness'")


@pytest.mark.parametrize("argv, words", [
    (["demo", "shape", "--laplacian", "-1"], "ShapeExperiment.laplacian must be a finite weight >= 0"),
    (["demo", "smoke-shape", "--text", ""], "the target text must be visible characters"),
])
def test_a_demo_runners_refusal_is_one_line_on_stderr(tmp_path, capsys, argv, words):
    """Issue 52: the runners of the scenes' own demos printed "error: ..." to stdout, some without the prefix."""
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("gradsim-jax: error: ") and words in captured.err
    assert "error" not in captured.out


def test_the_top_level_help_lists_every_demo(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    demos = subcommands(subcommands(build_parser())["demo"])
    assert len(demos) > 20
    for name in demos:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name


# ---------------------------------------------------------------------------------------------------
# Unreadable targets


def test_corrupt_mp4_is_one_clean_line(tmp_path, capsys):
    (tmp_path / "bad.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"junk" * 64)
    assert main(["fit", str(write(tmp_path)), "--target", str(tmp_path / "bad.mp4"),
                 "--out", str(tmp_path / "run"), *QUIET]) == 2
    err = clean_error(capsys, "bad.mp4", "cannot read frames")
    assert "ffmpeg version" not in err and "configuration:" not in err
    assert len(err.strip().splitlines()) == 1, err


def corrupt_gif(path, start):
    """The noise GIF with 200 bytes from `start` inverted: at 3900 Pillow fails with an IndexError, at 750
    the frame header claims a size of a billion pixels (Pillow's DecompressionBombError)."""
    good = noise_gif(path).read_bytes()
    path.write_bytes(good[:start] + bytes(b ^ 0xFF for b in good[start:start + 200]) + good[start + 200:])
    return path


@pytest.mark.parametrize("case", ["flipped gif 3900", "flipped gif 750", "truncated gif", "junk png in folder",
                                  "empty png in folder", "junk png", "junk mp4", "empty mp4"])
def test_unreadable_target_names_the_file_in_our_words(tmp_path, case):
    if case.startswith("flipped gif"):
        path = bad = corrupt_gif(tmp_path / "t.gif", int(case.split()[-1]))
    elif case == "truncated gif":
        data = noise_gif(tmp_path / "t.gif").read_bytes()
        (tmp_path / "t.gif").write_bytes(data[: len(data) // 2])
        path = bad = tmp_path / "t.gif"
    elif case.endswith("in folder"):
        path = tmp_path / "frames"
        path.mkdir()
        good = noise_gif(tmp_path / "t.gif", frames=1)
        from PIL import Image

        Image.open(good).convert("RGBA").save(path / "frame_0000.png")
        bad = path / "frame_0001.png"
        bad.write_bytes(b"" if case.startswith("empty") else b"\x89PNG junk")
    elif case == "junk png":
        path = bad = tmp_path / "t.png"
        bad.write_bytes(b"junk")
    else:
        path = bad = tmp_path / "t.mp4"
        bad.write_bytes(b"" if case.startswith("empty") else b"junk" * 100)
    with pytest.raises(ValueError) as e:
        load_target(path, 16)
    message = str(e.value)
    assert str(bad) in message and "cannot read frames" in message
    for noise in ("pip install", "imageio[", "backend", "=== stderr ===", "ffmpeg version"):
        assert noise not in message, message


# ---------------------------------------------------------------------------------------------------
# Plots of a fit without iterations


def test_plots_of_an_empty_history_are_written(tmp_path):
    history = {"iteration": [], "loss": [], "params": {"mass": []}, "stage": []}
    assert sysid.plot_loss(tmp_path / "loss.png", history).is_file()
    assert sysid.plot_params(tmp_path / "params.png", history, {"mass": 0.01}).is_file()


# ---------------------------------------------------------------------------------------------------
# Resume: the checkpoint must belong to the same target, scene and settings


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A 2-iteration fit with checkpoints, from a target with more frames than the scene; returns the
    folder, the target, the run's folder, what it printed on stderr and the (src, dst) of every os.replace."""
    folder = tmp_path_factory.mktemp("resume")
    scene = write(folder)
    target = folder / "target.gif"
    write(folder, SCENE.replace("frames = 3", "frames = 5"), "long.toml")
    assert main(["render", str(folder / "long.toml"), "--out", str(target)]) == 0
    out = folder / "run"
    replaced, real_replace, err = [], os.replace, io.StringIO()

    def spy(src, dst):
        replaced.append((os.fspath(src), os.fspath(dst)))
        return real_replace(src, dst)

    os.replace = spy
    try:
        with contextlib.redirect_stderr(err):
            assert main(["fit", str(scene), "--target", str(target), "--out", str(out), *QUIET,
                         "--checkpoint-every", "1"]) == 0
    finally:
        os.replace = real_replace
    return folder, target, out, err.getvalue(), replaced


@pytest.fixture
def run_copy(fitted, tmp_path):
    """argv resuming a private copy of the fitted run (tests may change it)."""
    import shutil

    folder, target, out, _, _ = fitted
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    return ["fit", str(folder / "scene.toml"), "--target", str(target), "--out", str(copy), *QUIET,
            "--checkpoint-every", "1", "--resume"], copy


def test_target_with_more_frames_than_the_scene_is_cut_with_a_warning(fitted):
    _, _, out, err, replaced = fitted
    assert "6 frames" in err and "first 4" in err and "Traceback" not in err
    # Every output is written under a temporary name in its folder, then renamed into place.
    for name in ("report.json", "loss.png", "params.png", "target.gif", "comparison.mp4",
                 "checkpoint/checkpoint.npz"):
        final = os.fspath(out / name)
        sources = [src for src, dst in replaced if dst == final]
        assert sources, name
        assert all(os.path.dirname(src) == os.path.dirname(final) for src in sources), name
    report = json.loads((out / "report.json").read_text())
    assert report["resume"] is None
    assert report["inputs"]["iterations"] == 2 and report["inputs"]["learning_rate"] == 0.05
    assert len(report["inputs"]["target"]) == 64 and len(report["inputs"]["scene"]) == 64
    meta = load_checkpoint(checkpoint_path(str(out / "checkpoint"))).extra["metadata"]
    assert meta == report["inputs"]


@pytest.mark.parametrize("change, words", [
    ("learning rate", ["learning_rate", "0.05", "0.1"]),
    ("iterations", ["iterations", "2", "1"]),
    ("target", ["target"]),
    ("scene", ["scene"]),
    ("free", ["free", "mass", "stiffness"]),
])
def test_resume_refuses_a_checkpoint_of_other_inputs(fitted, run_copy, capsys, change, words, no_simulation):
    folder, target, _, _, _ = fitted
    argv, _ = run_copy
    if change == "learning rate":
        argv += ["--learning-rate", "0.1"]
    elif change == "iterations":
        argv += ["--iterations", "1"]
    elif change == "target":
        frames = load_target(target, 16, max_frames=4).frames
        frames[0, 0, 0, :3] = 1.0 - frames[0, 0, 0, :3]
        argv[argv.index(str(target))] = str(write_gif(folder / "other.gif", frames, fps=60.0))
    elif change == "scene":
        argv[1] = str(write(folder, SCENE.replace("height = 16", "height = 16\nambient = 0.5"), "other.toml"))
    else:
        argv[1] = str(write(folder, SCENE.replace('free = ["mass"]', 'free = ["mass", "stiffness"]'),
                            "free.toml"))
    assert main(argv) == 2
    err = clean_error(capsys, "checkpoint", "--resume-anyway", *words)
    assert len([line for line in err.splitlines() if "error:" in line]) == 1


def test_resume_anyway_records_both_inputs(fitted, run_copy, capsys):
    folder = fitted[0]
    argv, out = run_copy
    assert main([*argv, "--iterations", "1", "--resume-anyway"]) == 2  # 2 done, 1 asked: a clean error
    clean_error(capsys, "iteration 2", "at least 2 iterations")
    # Another initial guess (nothing to recompile): the checkpoint's state wins, the report says so.
    argv[1] = str(write(folder, SCENE + "\n[initial]\nmass = 0.012\n", "initial.toml"))
    assert main([*argv, "--resume-anyway"]) == 0
    report = json.loads((out / "report.json").read_text())
    resume = report["resume"]
    assert resume["from_iteration"] == 2 and resume["resume_anyway"] is True
    assert list(resume["differences"]) == ["initial"]
    old, new = resume["differences"]["initial"]
    assert old == resume["checkpoint_inputs"]["initial"] and new == report["inputs"]["initial"] and old != new
    assert report["initial"]["mass"] == pytest.approx(0.012) and report["iterations"]["adam"] == 2


def test_old_checkpoint_without_inputs_resumes_with_a_warning(run_copy, capsys):
    argv, out = run_copy
    path = checkpoint_path(str(out / "checkpoint"))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"][()]))
    del meta["extra"]["metadata"]
    arrays["meta"] = np.asarray(json.dumps(meta))
    np.savez(path, **arrays)
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "warning" in captured.err.lower() and "records no inputs" in captured.err
    assert "Traceback" not in captured.err
    report = json.loads((out / "report.json").read_text())
    assert report["resume"]["checkpoint_inputs"] is None and report["resume"]["from_iteration"] == 2
