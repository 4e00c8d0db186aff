"""Recover a cloth's mass, membrane stiffness and damping from a rendered video (what `gradsim-jax demo
cloth` does), written out step by step.

    python examples/cloth_parameters.py          # about 2 minutes on a laptop CPU; outputs in runs/example-params
"""

from gradsim_jax import sysid
from gradsim_jax.scenes.demos import hanging_cloth

# A cloth pinned along one edge swings down; a known push on its free edge separates mass from stiffness.
experiment = hanging_cloth(size=48, frames=30)
truth = dict(experiment.theta)
_, target = sysid.simulate_video(experiment, truth)

free = ("mass", "stiffness", "damping")
initial = sysid.perturbed(truth, free, seed=0)  # each 30-50 % off
config = sysid.FitConfig(free=free, iterations=60, polish=15)
report = sysid.run(experiment, target, initial, config, "runs/example-params", truth=truth)
print({name: f"{err:.1e}" for name, err in report["relative_error"].items()})
