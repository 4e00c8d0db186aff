"""The renderer's capacities of a scene file: left out ([render] tile_capacity and pixel_capacity), every face a
tile or a pixel meets is kept (exact); `capacity_hint` is the one line `gradsim-jax fit` prints for a scene large
enough that smaller capacities would pay, with the numbers measured on the photoreal swing.

Why no automatic rule. A rule that drops no face (twice what the scene's start needs in its fullest tile and
pixel, measured on the start's motion) gains nothing where the capacities matter: the swing starts horizontal,
seen nearly edge-on, so its start stacks more than 256 of its 512 faces in one 8 x 8 tile, and the rule kept
every face per tile and 224 per pixel, whose per-pixel lists made a 30-frame video's gradient slower (4.0 s)
than the exact one (2.8 s). The speed of `tile_capacity = 288`, `pixel_capacity = 48` (1.0 s) comes from dropping
the farthest faces where the cloth is seen edge on (4752 dropped in 13 of Blender's 30 frames): a mean absolute
change of 5.6e-5 in the pixels, at most 0.64 on a few edge pixels. Whether that is acceptable is the user's call,
so the default stays exact and the fit says what the choice is worth.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from gradsim_jax.sysid import Experiment

#: Scenes that draw more faces than this and keep every one get the hint.
HINT_FACES = 256


def capacity_hint(exp: Experiment) -> Optional[str]:
    """The hint for a scene of more than `HINT_FACES` faces rendered with every face kept (module docstring).

    Args:
        exp: the experiment (its faces and render settings).

    Returns:
        A one-line hint, or None (a small scene, or capacities smaller than the number of faces).
    """
    faces = int(np.shape(exp.faces)[0])
    if faces <= HINT_FACES or min(exp.settings.tile_capacity, exp.settings.pixel_capacity) < faces:
        return None
    return (f"every one of the {faces} faces is kept per 8 x 8 tile and per pixel (exact, [render] tile_capacity and "
            "pixel_capacity left out); on the photoreal swing (512 faces, 80 x 60 px) tile_capacity = 288 and "
            "pixel_capacity = 48 made a 30-frame video's gradient 2.8 x quicker (1.0 s instead of 2.8 s) at a "
            "mean absolute image change of 5.6e-5 (at most 0.64 on edge pixels): docs/howto/real-cloth.md")
