"""Control: explicit policies (weight matrix, bias, tanh of phase and state features), the actuators they
drive (tet and triangle activations, bending rest angles, particle forces), a rollout under a policy, and
training by gradient descent with a random-policy baseline.

    policy = PhasePolicy(frequencies=(1.0, 2.0), amplitude=0.3)
    actuator = tet_activation(num_tets, groups)              # few outputs drive many tets
    pp = init_policy(jax.random.key(0), policy.num_inputs, actuator.outputs)
    rollout = lambda pp: simulate_policy(top, par, st, pp, policy, actuator, frames=60, substeps=32)
    result = train_policy(loss_of_trajectory, pp, rollout, iterations=100, learning_rate=1e-2)
"""

from gradsim_jax.control.actuators import (
    Actuators, BendRest, ParticleForce, TetActivation, TriActivation, bend_rest, merge_controls, particle_force,
    tet_activation, tri_activation,
)
from gradsim_jax.control.policies import (
    ComFeatures, PhasePolicy, PolicyParams, apply_policy, com_features, init_policy, phase_features,
)
from gradsim_jax.control.rollout import policy_outputs, simulate_policy
from gradsim_jax.control.train import random_policy_baseline, train_policy

__all__ = [
    "Actuators", "BendRest", "ComFeatures", "ParticleForce", "PhasePolicy", "PolicyParams", "TetActivation",
    "TriActivation", "apply_policy", "bend_rest", "com_features", "init_policy", "merge_controls", "particle_force",
    "phase_features", "policy_outputs", "random_policy_baseline", "simulate_policy", "tet_activation",
    "train_policy", "tri_activation",
]
