"""gradSim's cloth experiment: estimate the initial velocity of every particle of a thrown cloth from video
(gradSim, Table 3: mean relative error 0.026).

    python examples/cloth_velocity.py            # outputs in runs/example-velocity
"""

from gradsim_jax import sysid
from gradsim_jax.scenes.demos import tossed_cloth

experiment = tossed_cloth(size=48, frames=20)  # a soft 3 x 3-cell cloth with a spinning velocity field
truth = dict(experiment.theta)
_, target = sysid.simulate_video(experiment, truth)

initial = sysid.perturbed(truth, ("velocity",), seed=0, free_particles=experiment.free_particles)
config = sysid.FitConfig(free=("velocity",), iterations=30, polish=10)
report = sysid.run(experiment, target, initial, config, "runs/example-velocity", truth=truth)
print(f"mean relative error of the initial velocities: {report['relative_error']['velocity']:.2e}")
