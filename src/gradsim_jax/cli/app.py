"""`gradsim-jax`: recover the physical parameters of cloth, rigid bodies and soft bodies from video, and
train controls that make them reach a target image.

    gradsim-jax demo DEMO [--out runs/DEMO] [--iterations N] ...     (DEMO below; `demo DEMO --help`)
    gradsim-jax render SCENE.toml --out target.gif      (synthetic target from the scene's [material])
    gradsim-jax fit SCENE.toml --target VIDEO [--out runs/fit] [--restarts N] ...
    gradsim-jax predict SCENE.toml --fit runs/fit [--frames N] [--reference X.npy]  (past the fitted frames)
    gradsim-jax gradcheck | horizon SCENE.toml ...     (are the gradients right; how far are they informative)
    gradsim-jax landscape SCENE.toml --vary mass,stiffness [--span 0.5 --points 21]
    gradsim-jax --version
"""

from __future__ import annotations

import argparse
import difflib
import textwrap

from gradsim_jax.cli import demo, diagnostics, fit, predict, render
from gradsim_jax.cli.args import fail, show_warning


def build_parser() -> argparse.ArgumentParser:
    """The `gradsim-jax` parser: one subcommand module each (`cli.demo`, `cli.fit`, `cli.render`,
    `cli.diagnostics`). Its description lists every demo the `demo` parser has, so it cannot leave one out."""
    from gradsim_jax.version import __version__

    parser = argparse.ArgumentParser(prog="gradsim-jax", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gradsim-jax {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in dict.fromkeys(COMMANDS.values()):  # a module may add several commands
        command.add_parser(sub)
    demos = ", ".join(subcommands(subcommands(parser)["demo"]))
    parser.description = __doc__ + "\n" + textwrap.fill(demos, width=100, initial_indent="DEMO: ",
                                                      subsequent_indent="      ", break_on_hyphens=False) + "\n"
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of `parser` by name, in the order they were added ({} when it has none).

    Args:
        parser: an argparse parser (the main one, or a subcommand's such as `demo`).

    Returns:
        {name: subparser}.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


#: Each subcommand's module: `add_parser(sub)` and `run(args) -> exit status`.
COMMANDS = {"demo": demo, "fit": fit, "predict": predict, "render": render,
            **{name: diagnostics for name in diagnostics.COMMANDS}}


def _parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """`parser.parse_args(argv)`, except that an unknown option is reported by the (sub)command it was given
    to: its usage line ("usage: gradsim-jax fit ...") and, for a misspelt option, the closest ones it has."""
    args, unknown = parser.parse_known_args(argv)
    if not unknown:
        return args
    owner = parser
    for name in (getattr(args, "command", None), getattr(args, "demo", None)):
        owner = subcommands(owner).get(name, owner)
    options = [s for a in owner._actions for s in a.option_strings if s.startswith("--")]
    close = [m for u in unknown if u.startswith("-") for m in difflib.get_close_matches(u.split("=")[0], options, 1)]
    hint = f" (did you mean {' or '.join(dict.fromkeys(close))}?)" if close else ""
    owner.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def main(argv=None) -> int:
    """Run `gradsim-jax` on a command line: parse it, run its subcommand, and turn the errors a user can cause
    (checkpoint mismatch, divergence, traced check, OSError) into one line on stderr.

    Args:
        argv: the arguments after the program's name; None: sys.argv[1:].

    Returns:
        The exit status: the subcommand's, 2 for an error reported as one line or for no subcommand (the
        help is printed).
    """
    import warnings

    parser = build_parser()
    args = _parse(parser, argv)
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
