"""`simulate` without `substeps` chooses them from the scene's stability bound (`physics.substeps`): the README's
cloth, which blew up at 16 substeps, runs; every demo scene's choice passes every step check and stays finite;
a traced scene gets an error that says what to pass."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import ContactWarning, StepWarning, step_report
from gradsim_jax.physics.substeps import DEFAULT_MAX_DT, STEP_MARGIN, SubstepsChosen, stable_substeps, start_checks
from gradsim_jax.scenes import catalog


def readme_cloth():
    return gs.cloth_grid(10, 10, 0.1, 0.1, mass=0.05, fix_top=True).build()


def test_readme_cloth_is_stable_without_substeps_and_blew_up_at_16():
    topology, params, state0 = readme_cloth()
    with pytest.warns(StepWarning):  # the README's old call: dt 1.04 ms against a stable 0.644 ms
        blown = gs.simulate(topology, params, state0, frames=30, substeps=16)
    assert not np.isfinite(np.asarray(blown.particles.x)).all()
    with pytest.warns(SubstepsChosen, match=r"substeps not given: 33 a frame"):
        trajectory = gs.simulate(topology, params, state0, frames=30)
    assert np.isfinite(np.asarray(trajectory.particles.x)).all()
    # Hanging, it has fallen from its plane: the lowest row is below the top row by at least a cell.
    x = np.asarray(trajectory.particles.x[-1])
    assert x[:, 1].min() < x[:, 1].max() - 0.1


def test_choice_keeps_the_margin_of_the_stable_step():
    topology, params, state0 = readme_cloth()
    s = stable_substeps(topology, params, state0)
    limit = step_report(topology, params, state0).max_stable_dt  # Lanczos, converged: the exact limit
    assert (1.0 / 60.0) / s <= STEP_MARGIN * limit * 1.03  # power iterations read it up to 3 % low
    assert (1.0 / 60.0) / (s - 1) > STEP_MARGIN * limit * 0.97  # and the next fewer would not keep the margin


def test_soft_scene_gets_the_accuracy_step():
    topology, params, state0 = gs.cloth_grid(2, 2, 0.1, 0.1, mass=0.05, fix_top=True, tri_ke=1.0, tri_ka=1.0,
                                             tri_kd=0.0).build()
    assert stable_substeps(topology, params, state0, frame_dt=1 / 30) == round((1 / 30) / DEFAULT_MAX_DT)


def test_traced_scene_without_substeps_says_what_to_pass():
    topology, params, state0 = readme_cloth()
    substeps = stable_substeps(topology, params, state0)

    def loss(p, substeps=None):
        return jnp.mean(gs.simulate(topology, p, state0, frames=2, substeps=substeps).particles.x[-1, :, 1])

    with pytest.raises(ValueError, match=r"pass substeps=.*gs\.stable_substeps"):
        jax.grad(loss)(params)
    grad = jax.grad(loss)(params, substeps)
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grad))


def _demo_experiments():
    out = {"cloth": lambda: catalog.demo_experiment(("mass",), size=16, frames=30),
           "cloth-velocity": lambda: catalog.demo_experiment(("velocity",), size=16, frames=20),
           "cloth-friction": lambda: catalog.demo_experiment(("friction",), size=16, frames=30)}
    for name, (_, _, estimate, _) in catalog.RIGID_DEMOS.items():
        out[name] = lambda name=name, e=estimate: catalog.rigid_demo_experiment(
            name, tuple((e or "body_mass").split(",")) if name == "rigid-material" else (), size=16)
    for name, (_, _, estimate, _) in catalog.CONTACT_DEMOS.items():
        out[name] = lambda name=name, e=estimate: catalog.contact_demo_experiment(name, tuple(e.split(",")), size=16)
    for name, (_, _, estimate, _) in catalog.FEM_DEMOS.items():
        out[name] = lambda name=name, e=estimate: catalog.fem_demo_experiment(
            name, tuple(e.split(",")) if e else (), size=16)
    for name, (_, _, estimate, _, _) in catalog.ODE_DEMOS.items():
        out[name] = lambda name=name, e=estimate: catalog.ode_demo_experiment(name, tuple(e.split(",")), size=16)
    from gradsim_jax.scenes.control import task_builder

    for name in catalog.CONTROL_DEMOS:
        out[name] = lambda name=name: task_builder(name)(size=16).exp
    return out


DEMOS = _demo_experiments()


#: Demo scenes whose rollout compiles slowly (ODE solvers, contact between bodies, 8-20 s on 2 busy cores):
#: their step checks run in `make test`, their rollouts in `make test-all`.
SLOW_ROLLOUTS = {"double-pendulum", "drape", "lift", "stack", "rigid-restitution", "pendulum", "rigid-mass",
                 "control-cloth", "control-jellyfish", "control-walker"}


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_every_demo_scene_is_stable_without_substeps(name):
    exp = DEMOS[name]()
    chosen = stable_substeps(exp.topology, exp.params, exp.state0, frame_dt=exp.frame_dt, integrator=exp.integrator)
    assert start_checks(exp.topology, exp.params, exp.state0, exp.frame_dt / chosen, exp.integrator) == []
    # The check can fail: a quarter of the chosen substeps is too few for some stiff part, unless the accuracy
    # step (nothing stiff: the ODE bodies, the impulse contact) chose them.
    few = max(1, chosen // 4)
    assert (start_checks(exp.topology, exp.params, exp.state0, exp.frame_dt / few, exp.integrator) != []
            or exp.frame_dt / chosen >= 0.999 * DEFAULT_MAX_DT)
    if name not in SLOW_ROLLOUTS:
        _check_rollout(name, exp)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_ROLLOUTS))
def test_slow_demo_scene_rollouts_are_stable_without_substeps(name):
    _check_rollout(name, DEMOS[name]())


def _check_rollout(name, exp):
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepWarning)
        warnings.simplefilter("error", ContactWarning)
        warnings.simplefilter("ignore", SubstepsChosen)
        trajectory = gs.simulate(exp.topology, exp.params, exp.state0, frames=exp.frames, frame_dt=exp.frame_dt,
                                 integrator=exp.integrator)
    for i, leaf in enumerate(jax.tree.leaves(trajectory)):
        assert np.isfinite(np.asarray(leaf)).all(), f"{name}: leaf {i} of the trajectory is not finite"
