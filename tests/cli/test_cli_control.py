"""`gradsim-jax demo control-fem | control-cloth | control-walker | control-jellyfish`: --help, and reduced runs
(tiny images, few frames and iterations, slow): outputs, report keys, and --resume continuing the checkpoint.
(Training beating random policies at reduced size, for control-fem, -walker and -jellyfish, is in
tests/control/test_control_locomotion.py; a reduced control-cloth run costs more than the suite's budget.)"""

import json

import pytest

from gradsim_jax.cli import build_parser, main

REPORT_KEYS = ("objective", "trained_final_error_m", "random_baseline", "ratio_random_mean_over_trained",
               "iterations", "total_wall_time_s", "training_wall_time_s")
OUTPUTS = ("untrained.gif", "trained.gif", "comparison.mp4", "target.png", "loss.png", "report.json", "report.html")


@pytest.mark.parametrize("demo", ["control-fem", "control-cloth", "control-walker", "control-jellyfish"])
def test_help_lists_options(demo, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", demo, "--help"])
    text = capsys.readouterr().out
    for option in ("--size", "--frames", "--iterations", "--seed", "--out", "--resume", "--no-progress",
                   "--force", "--random-policies"):
        assert option in text


def _run(demo, out, *extra):
    assert main(["demo", demo, "--size", "16", "--random-policies", "4", "--no-progress", "--out", str(out),
                 *extra]) == 0
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    assert (out / "checkpoint").is_dir()
    return json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_control_fem_reduced_outputs_and_resume(tmp_path):
    report = _run("control-fem", tmp_path, "--frames", "4", "--iterations", "2", "--checkpoint-every", "1")
    for key in REPORT_KEYS:
        assert key in report
    assert report["random_baseline"]["n"] == 4
    resumed = _run("control-fem", tmp_path, "--frames", "4", "--iterations", "3", "--checkpoint-every", "1",
                   "--resume")
    assert resumed["iterations"] == 3



@pytest.mark.slow
def test_control_walker_and_jellyfish_reduced_outputs(tmp_path):
    for demo in ("control-walker", "control-jellyfish"):
        report = _run(demo, tmp_path / demo, "--frames", "4", "--iterations", "2")
        for key in REPORT_KEYS:
            assert key in report
        assert report["experiment"] == demo and report["initial_policy_scale"] == 1.0
