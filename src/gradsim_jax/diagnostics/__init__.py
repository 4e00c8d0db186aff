"""Diagnostics of gradients: are they right (`gradcheck`: reverse vs forward mode vs finite differences in
float64, float32 vs float64), how far they stay informative (`gradient_horizon`, `lyapunov_exponent`), and
what the loss looks like around an estimate (`loss_landscape`). They take a `problem.SceneProblem`
(plain loss functions of a parameter dict; `scenefile.load_problem` makes one from a scene file); the command
line is `cli.diagnostics` (`gradsim-jax gradcheck | horizon | landscape`)."""

from gradsim_jax.diagnostics.gradcheck import GradcheckResult, QuantityCheck, gradcheck
from gradsim_jax.diagnostics.horizon import HorizonResult, gradient_horizon, lyapunov_exponent, predicted_horizon
from gradsim_jax.diagnostics.landscape import Landscape, loss_landscape, relative_grid

__all__ = ["GradcheckResult", "HorizonResult", "Landscape", "QuantityCheck", "gradcheck", "gradient_horizon",
           "loss_landscape", "lyapunov_exponent", "predicted_horizon", "relative_grid"]
