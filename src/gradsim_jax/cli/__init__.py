"""The command line, `gradsim-jax`: one module per command (`demo`, `fit`, `render`, `diagnostics` for
gradcheck / horizon / landscape), `args` for what they share (argument types, flags, the preflight) and
`app` for the parser and the dispatch. It is the top layer: it imports every other, none imports it."""

from gradsim_jax.cli.app import COMMANDS, build_parser, main
from gradsim_jax.scenes.catalog import (  # noqa: F401  (the demo tables, for benchmarks and tests)
    CONTROL_DEMOS, FEM_DEMOS, RIGID_DEMOS, demo_experiment, demo_fit_config, fem_demo_experiment,
    rigid_demo_experiment,
)

__all__ = ["COMMANDS", "build_parser", "main"]
