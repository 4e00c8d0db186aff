"""The argument parsers of the cloth demos (`demo cloth`, `demo cloth-control`) and of `demo rigid-shape`
(`cli.demo.add_parser` adds them with the table demos' parsers).
"""

from __future__ import annotations

import argparse

from gradsim_jax.cli.args import count, fit_flags, force_flag, positive, progress_flags
from gradsim_jax.scenes.catalog import DEMO_ESTIMATES


def add_cloth_parser(demos) -> None:
    """The `demo cloth` subcommand on the demos' subparsers.

    Args:
      demos: the subparsers of `gradsim-jax demo` (`add_subparsers()`).
    """
    cloth = demos.add_parser(
        "cloth", help="recover cloth parameters from a rendered video",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Render a target video of a cloth from true parameters, start from perturbed ones, fit "
                    "them back through simulation and rendering, and write target/initial/fitted GIFs, "
                    "comparison.mp4, loss.png, params.png and report.json to OUT.\n\n"
                    "Scenes: velocity -> a cloth tossed with a spinning velocity field (gradSim's cloth demo, "
                    "every particle's initial velocity estimated); friction -> a cloth landing and sliding on "
                    "the ground; anything else -> a cloth pinned along one edge swinging down, with a known "
                    "push on its free edge during the first frames (that push is what separates mass from "
                    "stiffness and damping).")
    cloth.add_argument("--estimate", default="mass,stiffness,damping",
                       help=f"comma-separated quantities: {', '.join(DEMO_ESTIMATES)} "
                            "(default mass,stiffness,damping)")
    cloth.set_defaults(quantities=DEMO_ESTIMATES)
    cloth.add_argument("--size", type=count(1), default=48, help="image size in pixels (default 48)")
    cloth.add_argument("--frames", type=count(1), default=30, help="frames to simulate (default 30)")
    cloth.add_argument("--cells", type=count(1), default=None, help="cloth cells per side (default: scene's own)")
    cloth.add_argument("--perturb", type=float, nargs=2, default=(0.3, 0.5), metavar=("LOW", "HIGH"),
                       help="relative offset of the initial guess from the truth (default 0.3 0.5)")
    cloth.add_argument("--no-push", action="store_true",
                       help="drop the known push (then mass is not separable from stiffness and damping)")
    cloth.add_argument("--seed", type=int, default=0, help="seed of the initial perturbation")
    cloth.add_argument("--out", default="runs/cloth", help="output folder (default runs/cloth)")
    fit_flags(cloth, polish=None)
    progress_flags(cloth)
    force_flag(cloth)


def add_cloth_control_parser(demos) -> None:
    """The `demo cloth-control` subcommand on the demos' subparsers.

    Args:
      demos: the subparsers of `gradsim-jax demo` (`add_subparsers()`).
    """
    ctrl = demos.add_parser(
        "cloth-control", help="find the initial velocity that makes a cloth land where a target image shows",
        description="gradSim's control_cloth: optimize one initial velocity (a 3-vector) so that the last "
                    "rendered frame matches a target image rendered with a hidden velocity; reports the final "
                    "position error. Writes the same outputs as `demo cloth` to OUT.")
    ctrl.add_argument("--size", type=count(1), default=48, help="image size in pixels (default 48)")
    ctrl.add_argument("--frames", type=count(1), default=30, help="frames to simulate (default 30)")
    ctrl.add_argument("--iterations", type=count(0), default=150, help="Adam iterations (default 150)")
    ctrl.add_argument("--learning-rate", type=positive, default=0.15,
                      help="Adam learning rate, m/s (default 0.15)")
    ctrl.add_argument("--seed", type=int, default=0, help="seed of the hidden target velocity")
    ctrl.add_argument("--out", default="runs/cloth-control", help="output folder (default runs/cloth-control)")
    progress_flags(ctrl)
    force_flag(ctrl)


def add_rigid_shape_parser(demos) -> None:
    """The `demo rigid-shape` subcommand on the demos' subparsers.

    Args:
      demos: the subparsers of `gradsim-jax demo` (`add_subparsers()`).
    """
    shape = demos.add_parser(
        "rigid-shape", help="recover a rigid body's shape from a rendered video",
        description="Fit per-vertex offsets of a rigid body's hull to a video of the true shape moving.")
    shape.add_argument("--size", type=count(1), default=64, help="image size in pixels (default 64)")
    shape.add_argument("--frames", type=count(1), default=None, help="frames to simulate (default: scene's own)")
    shape.add_argument("--iterations", type=count(0), default=None, metavar="N",
                       help="Adam iterations (default: the demo's own)")
    shape.add_argument("--smoothness", type=float, default=None,
                       help="weight of the shape smoothness prior (default: the demo's own)")
    shape.add_argument("--seed", type=int, default=0, help="seed of the initial guess")
    shape.add_argument("--out", default="runs/rigid-shape", help="output folder (default runs/rigid-shape)")
    progress_flags(shape)
    force_flag(shape)
