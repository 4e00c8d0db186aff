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


#: Each contact demo's small end-to-end run: (extra flags, the quantities it fits). Both 50 % off, below 1e-3.
E2E = {"stack": ([], ["body_mass", "body_mu"]),  # 32 px, mass and friction between the boxes
       "drape": (["--frames", "24"], ["bending", "collider_mu"]),  # 32 px, 24 frames, cloth on a sphere
       "lift": (["--frames", "24"], ["mass", "stiffness"])}  # 32 px, 24 frames, a keyframed rod


@pytest.mark.slow  # suite time (CI's 10 minutes): end-to-end runs; `make test-all` runs them
@pytest.mark.parametrize("demo", sorted(E2E))
def test_contact_demo_recovers_its_quantities(demo, tmp_path):
    flags, free = E2E[demo]
    out = tmp_path / demo
    assert main(["demo", demo, "--size", "32", *flags, "--iterations", "30", "--polish", "15", "--out", str(out),
                 "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == free
    assert max(report["relative_error"].values()) < 1e-3, report["estimated"]


@pytest.mark.parametrize("demo,quantity", [("stack", "body_ke"), ("drape", "body_mass"), ("lift", "body_mass")])
def test_contact_demos_reject_a_quantity_of_another_scene(demo, quantity, tmp_path, capsys):
    assert main(["demo", demo, "--estimate", quantity, "--out", str(tmp_path / "s"), "--no-progress"]) == 2
    assert quantity in capsys.readouterr().err
