"""`gradsim-jax demo stack`, `demo drape` and `demo lift` (contact between bodies and with static and moving
colliders): options, end-to-end
recoveries at small sizes, usage errors."""

import json

import pytest

from gradsim_jax.cli import main

from cli_scenes import demo_help


@pytest.mark.parametrize("demo", ["stack", "drape", "lift"])
def test_contact_demo_help_lists_options(demo, capsys):
    text = demo_help(main, demo, capsys)
    assert "--estimate" in text and f"runs/{demo}" in text


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end run; `make test-all` runs it
def test_stack_demo_recovers_mass_and_friction_between_boxes(tmp_path):
    """The stack scene at 32 px, mass and friction 50 % off: both below 1e-3."""
    out = tmp_path / "stack"
    assert main(["demo", "stack", "--size", "32", "--iterations", "30", "--polish", "15", "--out", str(out),
                 "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == ["body_mass", "body_mu"]
    assert max(report["relative_error"].values()) < 1e-3, report["estimated"]


@pytest.mark.slow  # suite time: an end-to-end run
def test_drape_demo_recovers_bending_and_friction_on_the_sphere(tmp_path):
    """The drape scene at 32 px and 24 frames, bending and friction 50 % off: both below 1e-3."""
    out = tmp_path / "drape"
    assert main(["demo", "drape", "--size", "32", "--frames", "24", "--iterations", "30", "--polish", "15",
                 "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == ["bending", "collider_mu"]
    assert max(report["relative_error"].values()) < 1e-3, report["estimated"]


@pytest.mark.slow  # suite time: an end-to-end run
def test_lift_demo_recovers_mass_and_stiffness(tmp_path):
    """The lift scene (a keyframed rod) at 32 px and 24 frames, mass and stiffness 50 % off: both below 1e-3."""
    out = tmp_path / "lift"
    assert main(["demo", "lift", "--size", "32", "--frames", "24", "--iterations", "30", "--polish", "15",
                 "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == ["mass", "stiffness"]
    assert max(report["relative_error"].values()) < 1e-3, report["estimated"]


@pytest.mark.parametrize("demo,quantity", [("stack", "body_ke"), ("drape", "body_mass"), ("lift", "body_mass")])
def test_contact_demos_reject_a_quantity_of_another_scene(demo, quantity, tmp_path, capsys):
    assert main(["demo", demo, "--estimate", quantity, "--out", str(tmp_path / "s"), "--no-progress"]) == 2
    assert quantity in capsys.readouterr().err
