"""[target]: where the target video of a fit is and how its alpha is found (`read_target` -> `TargetFiles`), read
once for the job (`scenefile.job`), the diagnostics (`scenefile.problem`) and the checks of `load_scene`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from gradsim_jax.scenefile.schema import SceneFileError


@dataclasses.dataclass(frozen=True)
class TargetFiles:
    """[target] read: the target video and its alpha sources.

    Attributes:
        video: the target video as written in the file (.mp4, .gif, an image or a folder), or None.
        video_path: `video` resolved against the scene file's folder, or None.
        mask_path: the alpha mask video or folder, resolved, or None.
        key_color: [3] RGB in [0, 1] of the target's plain background (alpha from the distance to it), or None.
        tolerance: the key color tolerance, a distance in RGB (positive).
    """

    video: Optional[str]
    video_path: Optional[Path]
    mask_path: Optional[Path]
    key_color: Optional[list]
    tolerance: float


def read_target(spec) -> TargetFiles:
    """[target] as `TargetFiles` (the one reader of the section).

    Args:
        spec: the validated scene file (`SceneSpec`); paths are relative to its folder.

    Returns:
        The `TargetFiles`.

    Raises:
        SceneFileError: naming the file, when tolerance is not positive.
    """
    t = spec.sections.target
    if not t.tolerance > 0:
        raise SceneFileError(f"{spec.path}: [target] tolerance must be positive (a distance in RGB), got "
                             f"{t.tolerance}")
    return TargetFiles(video=t.video, video_path=spec.resolve(t.video) if t.video else None,
                       mask_path=spec.resolve(t.mask) if t.mask else None, key_color=t.key_color,
                       tolerance=t.tolerance)
