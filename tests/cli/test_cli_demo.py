"""`gradsim-jax demo cloth`: --help/--version, resume and checkpoint errors (its run end to end, every output
and a --resume of it: the `demo cloth` row of test_cli_options_tour.py)."""

import json
import shutil

import numpy as np
import pytest

from gradsim_jax import __version__, sysid
from gradsim_jax.cli import main
from gradsim_jax.fit import CheckpointError
from gradsim_jax.scenes.demos import hanging_cloth

TINY = ["--size", "16", "--frames", "8", "--cells", "2", "--no-progress"]


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_demo_help_lists_options(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "cloth", "--help"])
    text = capsys.readouterr().out
    for option in ("--estimate", "--iterations", "--size", "--frames", "--out", "--seed", "--resume",
                   "--checkpoint-every", "--no-progress", "velocity", "friction"):
        assert option in text


def test_demo_unknown_quantity_is_a_clear_error(capsys):
    assert main(["demo", "cloth", "--estimate", "colour", *TINY]) == 2
    assert "unknown quantity 'colour'" in capsys.readouterr().err


@pytest.mark.slow  # covered in make test by tests/fit/test_fit_checkpoint.py (bitwise resume of `fit`) and the CLI kill chain
def test_resume_equals_uninterrupted(tmp_path):
    exp = hanging_cloth(size=16, frames=6, cells=2)
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    initial = sysid.perturbed(truth, ("mass", "stiffness"), seed=0)

    def run(folder, resume=False, callback=None):
        config = sysid.FitConfig(free=("mass", "stiffness"), iterations=4, polish=0, report=False,
                                 progress=False, checkpoint_dir=str(folder), checkpoint_every=2, resume=resume,
                                 callback=callback)
        return sysid.identify(exp, target, initial, config)

    def killed(iteration, *_):
        if iteration == 1:  # just after the checkpoint of iteration 2 was written
            raise KeyboardInterrupt

    whole = run(tmp_path / "a")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", callback=killed)
    resumed = run(tmp_path / "b", resume=True)
    for name in ("mass", "stiffness"):
        assert np.array_equal(whole.theta[name], resumed.theta[name])
    assert whole.history["loss"] == resumed.history["loss"]

    # Missing and corrupted checkpoints: CheckpointError naming the file, before any fitting.
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        run(tmp_path / "empty", resume=True)
    shutil.copytree(tmp_path / "b", tmp_path / "c")
    (tmp_path / "c" / "checkpoint.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="checkpoint.npz"):
        run(tmp_path / "c", resume=True)


def test_cli_resume_errors_are_clear(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["demo", "cloth", "--resume", "--out", str(out), "--iterations", "2", *TINY]) == 2
    err = capsys.readouterr().err
    assert "checkpoint" in err and "Traceback" not in err
    (out / "checkpoint").mkdir(parents=True, exist_ok=True)
    (out / "checkpoint" / "checkpoint.npz").write_bytes(b"\x00garbage")
    assert main(["demo", "cloth", "--resume", "--out", str(out), "--iterations", "2", *TINY]) == 2
    assert "not a readable checkpoint" in capsys.readouterr().err
