"""Built-in scenes used by the CLI demos, examples, tests and benchmarks."""

from gradsim_jax.scenes.cloth import gradsim_demo_cloth

__all__ = ["gradsim_demo_cloth"]
