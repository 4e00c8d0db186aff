"""gradsim-jax: differentiable simulation and rendering in JAX."""

__version__ = "0.1.0"
