"""`gradsim-jax`: recover the physical parameters of cloth, rigid bodies and soft bodies from video, and
train controls that make them reach a target image.

    gradsim-jax demo cloth [--estimate mass,stiffness,damping] [--out runs/cloth] ...
    gradsim-jax demo cloth-control [--out runs/cloth-control] ...
    gradsim-jax demo rigid-mass | rigid-material [--estimate body_mass,body_ke,...] | rigid-restitution ...
    gradsim-jax demo rigid-shape [--out runs/rigid-shape] ...
    gradsim-jax demo fem-material [--estimate fem_mu,fem_lambda,fem_damping] | fem-mass ...
    gradsim-jax demo control-fem | control-cloth | control-walker | control-jellyfish [--iterations N] ...
    gradsim-jax render SCENE.toml --out target.gif      (synthetic target from the scene's [material])
    gradsim-jax fit SCENE.toml --target VIDEO [--out runs/fit] [--restarts N] ...
    gradsim-jax gradcheck | horizon SCENE.toml ...     (are the gradients right; how far are they informative)
    gradsim-jax landscape SCENE.toml --vary mass,stiffness [--span 0.5 --points 21]
    gradsim-jax --version
"""

from __future__ import annotations

import argparse

from gradsim_jax.cli import demo, diagnostics, fit, render
from gradsim_jax.cli.args import fail, show_warning


def build_parser() -> argparse.ArgumentParser:
    """The `gradsim-jax` parser: one subcommand module each (`cli.demo`, `cli.fit`, `cli.render`,
    `cli.diagnostics`)."""
    from gradsim_jax.version import __version__

    parser = argparse.ArgumentParser(prog="gradsim-jax", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gradsim-jax {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in dict.fromkeys(COMMANDS.values()):  # a module may add several commands
        command.add_parser(sub)
    return parser


#: Each subcommand's module: `add_parser(sub)` and `run(args) -> exit status`.
COMMANDS = {"demo": demo, "fit": fit, "render": render,
            **{name: diagnostics for name in diagnostics.COMMANDS}}


def main(argv=None) -> int:
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    from gradsim_jax.fit import CheckpointError, CheckpointMismatch, FitDiverged
    from gradsim_jax.physics import SimulationDiverged
    from gradsim_jax.physics.checks import TracedCheckError

    with warnings.catch_warnings():
        # imageio-ffmpeg starts ffmpeg with a fork while JAX's threads run; ffmpeg does not touch them.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        warnings.showwarning = show_warning
        try:
            if args.command is not None:
                status = COMMANDS[args.command].run(args)
                if status is not None:
                    return status
        except CheckpointMismatch as e:
            return fail(e.describe("--resume-anyway continues it regardless"))
        except (CheckpointError, FitDiverged, SimulationDiverged, TracedCheckError) as e:
            return fail(str(e))
        except OSError as e:  # a full disk, a folder removed during the run: no traceback, the reason
            return fail(f"{str(e.filename) + ': ' if e.filename else ''}{e.strerror or e}")
    parser.print_help() if args.command is None else parser.parse_args([args.command, "--help"])
    return 2
