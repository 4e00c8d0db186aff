"""Small scene files shared by the command-line tests."""

# A 2 x 2 cloth pinned along its left edge, lying flat in the x-z plane (rotated 90 degrees about x).
SMALL_CLOTH = """
[scene]
grid = [2, 2]
cell = [0.2, 0.2]
pos = [-0.2, 0.0, -0.2]
rot = [0.7071068, 0.7071068, 0.0, 0.0]
fix = ["left"]
"""


# [camera], [render] (16 x 16 px), [simulation] (2 frames of 8 substeps) and a [fit] of the mass: the tail of the
# scene-file tests of soft bodies and quantities.
SCENE_TAIL = """
[camera]
distance = 1.6
elevation = 25.0

[render]
width = 16
height = 16

[simulation]
substeps = 8
frames = 2

[fit]
free = ["mass"]
"""


def small_run(frames: int) -> str:
    """[simulation] (`frames` frames of 8 substeps), [render] (16 x 16 px) and a [fit] of the mass that the
    caller may continue with more [fit] keys: the cheapest scene-file fit."""
    return f"""
[simulation]
frames = {frames}
substeps = 8

[render]
width = 16
height = 16

[fit]
free = ["mass"]
"""


def write_scene(folder, text, name="scene.toml"):
    """Write `text` to folder/name and return the path."""
    path = folder / name
    path.write_text(text)
    return path


DEMO_OPTIONS = ("--size", "--frames", "--perturb", "--seed", "--out", "--iterations", "--polish", "--horizon",
                "--resume", "--no-progress", "--force")


def demo_help(main, demo: str, capsys) -> str:
    """`demo DEMO --help`'s text, after checking it lists the options every fitting demo has and its
    default output folder."""
    import pytest

    with pytest.raises(SystemExit):
        main(["demo", demo, "--help"])
    text = capsys.readouterr().out
    for option in DEMO_OPTIONS + (f"runs/{demo}",):
        assert option in text, option
    return text
