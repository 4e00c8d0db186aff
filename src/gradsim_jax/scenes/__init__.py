"""Built-in scenes of cloth, rigid bodies, FEM soft bodies and control tasks, used by the CLI demos, examples,
tests and benchmarks; `catalog` lists the demos (their scenes, estimates and fit settings)."""

from gradsim_jax.scenes.cloth import gradsim_demo_cloth

__all__ = ["gradsim_demo_cloth"]
