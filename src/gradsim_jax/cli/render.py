"""`gradsim-jax render SCENE.toml --out VIDEO`: a scene file's [material] values simulated and rendered to a
video (a synthetic target)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsim_jax.cli.args import fail, force_flag, preflight


def add_parser(sub) -> None:
    """`render` on `gradsim-jax`'s subparsers.

    Args:
        sub: the subparsers action of `gradsim-jax`'s parser (`add_subparsers`).
    """
    from gradsim_jax.scenefile import help_text

    ren = sub.add_parser("render", help="render a scene file's [material] values (cloth, rigid and soft bodies) to "
                                        "a video (a synthetic target)",
                         epilog=help_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ren.add_argument("scene", help="scene file (TOML)")
    ren.add_argument("--out", required=True, help="output .gif or .mp4 (or a folder: one RGBA PNG per frame)")
    force_flag(ren)


def _check_render_out(out: Path) -> None:
    """ValueError unless the video `out` (a file, or a PNG folder when it has no suffix) can be written:
    checked before simulating, so a typo costs nothing."""
    from gradsim_jax.sysid import ensure_writable_folder

    if out.suffix and out.is_dir():
        raise ValueError(f"--out {out}: is a folder; a {out.suffix} video is a file")
    if not out.suffix and out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; without a suffix --out names a folder of PNG frames")
    try:
        ensure_writable_folder(out.parent)
    except ValueError as e:
        raise ValueError(f"--out {out}: {e}") from None


def run(args) -> int:
    """`gradsim-jax render`: simulate the scene file's [material] values and write the video to --out.

    Args:
        args: the parsed command line (argparse.Namespace of the render parser: scene, out, force).

    Returns:
        The exit status: 0, or 2 after a one-line error.
    """
    from gradsim_jax import sysid
    from gradsim_jax.render.video import write_video
    from gradsim_jax.scenefile import SceneFileError, load_scene

    try:
        spec = load_scene(args.scene)
        cal = spec.calibration()
        exp = spec.experiment(background_image=spec.background_image())
        out = Path(args.out)
        if out.suffix.lower() not in ("", ".gif", ".mp4"):
            raise ValueError(f"--out {out}: write .gif, .mp4, or a folder (no suffix) of RGBA PNGs")
        _check_render_out(out)
    except (SceneFileError, ValueError) as e:
        return fail(str(e))
    if cal is not None and cal.distorted:
        print("note: the frames are those of an ideal pinhole camera: [camera] distortion is not applied")
    status = preflight(exp, args)
    if status is not None:
        return status
    _, frames = sysid.simulate_video(exp, {})
    try:
        write_video(out, frames, fps=1.0 / exp.frame_dt)
    except (OSError, ValueError) as e:
        return fail(f"--out {out}: {e}")
    print(f"rendered {frames.shape[0]} frames of {spec.path} to {out}")
    return 0
