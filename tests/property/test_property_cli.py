"""Property: whatever options `gradsim-jax` is given, it ends with exit status 0 (and its outputs) or 2 and a
message on stderr, never an uncaught exception or a traceback.

`main` runs in-process. Option values: negative, zero, huge, fractional, NaN, infinite, empty, non-numeric,
option-like; output paths that are files, under files, folders with a video suffix, unknown suffixes;
missing or corrupt targets; --resume without a checkpoint. The scene is a 1 x 1 cloth, 1 frame at 8 x 8
pixels, and a fit runs at most 2 Adam iterations, so the few examples that are valid stay cheap.
"""

import contextlib
import functools
import io
import json
import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

from gradsim_jax.cli import main
from gradsim_jax.render.video import write_gif

from bounded import bounded

SCENE = """
[scene]
grid = [1, 1]
cell = [0.2, 0.2]
pos = [-0.1, 0.0, -0.1]
rot = [0.7071068, 0.7071068, 0.0, 0.0]
fix = ["left"]

[simulation]
frames = 1
substeps = 2

[render]
width = 8
height = 8

[fit]
free = ["mass"]
iterations = 1
polish = 0
"""


@functools.lru_cache(maxsize=None)
def target_gif() -> bytes:
    """A 2-frame 8 x 8 target (noise: what matters is that it reads), made once."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.gif"
        write_gif(path, np.random.default_rng(0).uniform(0.0, 1.0, (2, 8, 8, 3)), fps=60.0)
        return path.read_bytes()


def workspace():
    """A temporary folder with scene.toml, target.gif, a regular file `afile`, a folder `folder.gif` and a
    folder `junk` holding a foreign file."""
    holder = tempfile.TemporaryDirectory()
    root = Path(holder.name)
    (root / "scene.toml").write_text(SCENE)
    (root / "target.gif").write_bytes(target_gif())
    (root / "corrupt.gif").write_bytes(target_gif()[:40])
    (root / "afile").write_text("not a folder")
    (root / "folder.gif").mkdir()
    (root / "junk").mkdir()
    (root / "junk" / "notes.txt").write_text("mine")
    return holder, root


def run_cli(argv):
    """(exit status, stdout, stderr) of `main(argv)`; argparse's SystemExit is an exit status too."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(a) for a in argv])
        except SystemExit as e:
            status = e.code
    return status, out.getvalue(), err.getvalue()


def check_clean(status, err, *, allowed=(0, 2)):
    assert status in allowed, (status, err)
    assert "Traceback" not in err, err
    if status != 0:
        assert len([line for line in err.splitlines() if "error:" in line]) == 1, err


# ---------------------------------------------------------------------------------------------------
# Option values, checked before anything runs

VALUES = st.one_of(
    st.integers(-3, 3).map(str),
    st.sampled_from(["0", "-0", "1.5", "", "abc", "nan", "inf", "-inf", "1e3", "1e-3", " 2", "0x10", "1_000",
                     "99999999999999999999", "-99999999999999999999", "\u0663", "--", "-1e30"]),
    st.floats().map(repr),
    st.text(max_size=4),
)
FIT_OPTIONS = ["--iterations", "--polish", "--frame-stride", "--horizon", "--checkpoint-every", "--learning-rate"]
DEMO_OPTIONS = [*FIT_OPTIONS, "--size", "--frames", "--cells", "--seed", "--estimate"]


@bounded(60)
@given(command=st.sampled_from(["fit", "demo cloth", "demo cloth-control"]), data=st.data())
def test_any_option_value_is_refused_by_name_or_accepted(command, data):
    """One option with a random value; the run is then stopped cheaply (a missing target for fit, an
    output under a regular file for the demos), so every outcome is exit status 2: from argparse naming the
    option, or from the command with its own error line."""
    options = DEMO_OPTIONS if command.startswith("demo") else FIT_OPTIONS
    if command == "demo cloth-control":
        options = ["--size", "--frames", "--iterations", "--learning-rate", "--seed", "--checkpoint-every"]
    option = data.draw(st.sampled_from(options))
    value = data.draw(VALUES)
    holder, root = workspace()
    with holder:
        if command == "fit":
            argv = ["fit", root / "scene.toml", "--target", root / "missing.gif", "--out", root / "run"]
        else:
            argv = [*command.split(), "--out", root / "afile" / "run"]
        status, _, err = run_cli([*argv, "--no-progress", option, value])
    check_clean(status, err, allowed=(2,))
    if "usage:" in err:  # argparse refused the value: it names the option
        event("refused by argparse")
        assert option in err, err
    else:
        event("refused by the command")


# ---------------------------------------------------------------------------------------------------
# Real runs


OUTS = st.sampled_from(["run", "junk", "afile", "afile/run", "folder.gif", "new/deep/run", "spaced name/\u00e9"])
TARGETS = st.sampled_from(["target.gif", "target.gif", "target.gif", "missing.gif", "corrupt.gif", "afile", "."])
LEARNING_RATES = st.sampled_from(["1e-30", "0.05", "0.05", "1e3", "1e30"])


@bounded(10)
@given(out=OUTS, target=TARGETS, iterations=st.sampled_from(["0", "1", "2"]),
       polish=st.sampled_from([None, "0", "1"]), stride=st.sampled_from([None, "1", "2", "1000000000"]),
       horizon=st.sampled_from([None, "1", "1000000000"]), every=st.sampled_from([None, "1", "1000000000"]),
       learning_rate=st.one_of(st.none(), LEARNING_RATES), loss=st.sampled_from([None, "rgb", "rgba", "silhouette"]),
       key_color=st.sampled_from([None, ("0", "0", "0"), ("nan", "0", "0"), ("2", "-1", "0")]),
       resume=st.booleans())
def test_fit_ends_with_a_report_or_one_error_line(out, target, iterations, polish, stride, horizon, every,
                                                  learning_rate, loss, key_color, resume):
    holder, root = workspace()
    with holder:
        argv = ["fit", root / "scene.toml", "--target", root / target, "--out", root / out, "--no-progress",
                "--iterations", iterations]
        for flag, value in (("--polish", polish), ("--frame-stride", stride), ("--horizon", horizon),
                            ("--checkpoint-every", every), ("--learning-rate", learning_rate), ("--loss", loss)):
            if value is not None:
                argv += [flag, value]
        if key_color is not None:
            argv += ["--key-color", *key_color]
        if resume:
            argv.append("--resume")
        status, _, err = run_cli(argv)
        check_clean(status, err)
        event(f"exit {status}" + (f": {err.split('error:')[-1].replace(str(root), '')[:50]}" if status else ""))
        if status == 0:
            report = json.loads((root / out / "report.json").read_text())
            assert math.isfinite(report["estimated"]["mass"])
            assert not any(p.name.startswith(".") and ".tmp" in p.name for p in (root / out).iterdir())
        elif out in ("afile", "afile/run"):
            assert str(root / out) in err or "--out" in err, err


@bounded(25)
@given(out=st.sampled_from(["t.gif", "t.mp4", "t.GIF", "frames", "t.avi", "t.png", "afile", "afile/t.gif",
                            "folder.gif", "junk", "new/deep/t.gif", ".gif", "t."]),
       scene=st.sampled_from(["scene.toml", "scene.toml", "missing.toml", "afile", "target.gif"]),
       force=st.booleans())
def test_render_writes_the_video_or_says_why_not(out, scene, force):
    holder, root = workspace()
    with holder:
        status, _, err = run_cli(["render", root / scene, "--out", root / out, *(["--force"] if force else [])])
        check_clean(status, err)
        event(f"exit {status}" + (f": {err.split('error:')[-1].replace(str(root), '')[:50]}" if status else ""))
        path = root / out
        if status == 0:
            assert path.exists() and path.suffix.lower() in ("", ".gif", ".mp4"), (out, err)
            assert not path.suffix or path.is_file()
        elif scene == "scene.toml":
            assert str(path) in err or "--out" in err, err
