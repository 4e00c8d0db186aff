"""The body-kind interface (`physics.component`, registry `physics.components`), and a worked toy kind built here.

The toy is a spring-mass chain as a body kind of its own, defined in this one module and registered with one
call (`register_component`): point masses joined by Hooke springs, moved by its own semi-implicit Euler steps
(the integrator's substeps), under the scene's gravity. `simulate` rolls it out with the rest of the scene;
the checks are analytic: a two-mass spring's period 2 pi sqrt(mu / k), its free-fall centre of mass and the
conservation of its momentum. docs/architecture.md ("Adding a body kind") walks through it.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry.scene import particles
from gradsim_jax.physics import simulate
from gradsim_jax.physics.component import BodyKind, ExtraBodyKind, OwnStepKind, RolloutOptions
from gradsim_jax.physics.components import COMPONENTS, register_component, unregister_component
from gradsim_jax.physics.integrators import Integrator, SemiImplicitEuler
from gradsim_jax.physics.checkpointing import CheckpointPolicy, checkpoint_policy
from gradsim_jax.physics.forces import PARTICLE_FORCES, ForceTerm
from gradsim_jax.physics.ode import OdeSystem
from gradsim_jax.typing import Array, is_concrete, pytree_dataclass


# ---------------------------------------------------------------------------------------------------------
# The toy kind: everything a new body kind needs, in one place.


@pytree_dataclass
class ChainTopology:
    """pairs [s, 2] int32: the masses each spring joins."""

    pairs: Array


@pytree_dataclass
class ChainParams:
    """mass [m] kg; ke [s] N/m, the springs' stiffness; rest [s] m, their rest lengths."""

    mass: Array
    ke: Array
    rest: Array


@pytree_dataclass
class ChainState:
    """x [m, 3] m, v [m, 3] m/s of the masses."""

    x: Array
    v: Array


def chain_forces(topology: ChainTopology, params: ChainParams, x):
    """Hooke forces [m, 3] N of the springs on the masses at x [m, 3] m (equal and opposite in each spring)."""
    i, j = topology.pairs[:, 0], topology.pairs[:, 1]
    d = x[j] - x[i]
    length = jnp.linalg.norm(d, axis=-1)
    f = (params.ke * (length - params.rest) / length)[:, None] * d
    return jnp.zeros_like(x).at[i].add(f).at[j].add(-f)


class SpringChain(ExtraBodyKind):
    """The toy kind: its branches are `Topology.bodies["chain"]`, `Params.bodies["chain"]`, `State.bodies["chain"]`."""

    name = "chain"

    def check(self, topology, params, state, options):
        if not is_concrete(self.branch(params)):  # inside jit: values unknown
            return
        mass = np.asarray(self.branch(params).mass)
        if not np.all(mass > 0):
            raise ValueError(f"Params.bodies['chain'].mass[{int(np.argmin(mass > 0))}] must be positive")

    def rollout(self, topology, params, state0, options: RolloutOptions, substeps: int):
        top, par, g = self.branch(topology), self.branch(params), params.world.gravity
        dt = options.frame_dt / substeps

        def step(s, _):
            v = s.v + dt * (chain_forces(top, par, s.x) / par.mass[:, None] + g)
            return ChainState(x=s.x + dt * v, v=v), None

        def frame(s, _):
            s, _ = jax.lax.scan(step, s, None, length=substeps)
            return s, s

        _, traj = jax.lax.scan(frame, state0, None, length=options.frames)
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), state0, traj)


@pytest.fixture
def chain_kind():
    """The toy kind registered for one test (the registration line), removed after it."""
    kind = register_component(SpringChain())
    yield kind
    unregister_component(kind.name)


def chain_scene(x, v, mass, ke, rest, gravity=(0.0, 0.0, 0.0), others=np.zeros((0, 3))):
    """A scene of free particles at `others` [p, 3] m and one chain (pairs: neighbours)."""
    top, par, st = particles(np.asarray(others)).build(gravity=gravity)
    m = len(mass)
    pairs = jnp.asarray([[k, k + 1] for k in range(m - 1)], jnp.int32)
    kind = SpringChain()
    top = kind.with_branch(top, ChainTopology(pairs=pairs))
    par = kind.with_branch(par, ChainParams(mass=jnp.asarray(mass), ke=jnp.asarray(ke), rest=jnp.asarray(rest)))
    st = kind.with_branch(st, ChainState(x=jnp.asarray(x), v=jnp.asarray(v)))
    return top, par, st


# ---------------------------------------------------------------------------------------------------------


def test_the_builtin_kinds_are_registered_and_declare_their_hooks():
    names = [kind.name for kind in COMPONENTS]
    assert names[:5] == ["ode", "smoke", "particles", "rigid", "colliders"]  # then any registered since
    assert all(isinstance(kind, BodyKind) for kind in COMPONENTS)
    assert [kind.name for kind in COMPONENTS if isinstance(kind, OwnStepKind)][:2] == ["ode", "smoke"]
    with pytest.raises(TypeError, match="BodyKind"):
        register_component(object())
    with pytest.raises(TypeError):
        BodyKind()  # abstract: present is declared, not guessed


def test_strategies_subclass_their_declared_bases():
    assert isinstance(SemiImplicitEuler(), Integrator) and SemiImplicitEuler().implicit_contact
    assert all(isinstance(checkpoint_policy(c), CheckpointPolicy) for c in (True, False, "substep", "sqrt"))
    assert all(isinstance(term, ForceTerm) for term in PARTICLE_FORCES.values())
    with pytest.raises(TypeError):
        OdeSystem()
    with pytest.raises(ValueError, match="policy object"):
        checkpoint_policy(object())
    top, par, st = particles(np.zeros((1, 3))).build()
    with pytest.raises(TypeError, match="Integrator"):
        simulate(top, par, st, frames=1, substeps=1, integrator=object())


def test_two_mass_chain_oscillates_with_the_analytic_period(chain_kind, x64):
    m1, m2, k, rest, stretch = 1.0, 3.0, 400.0, 0.5, 0.05
    x = [[0.0, 0.0, 0.0], [rest + stretch, 0.0, 0.0]]
    top, par, st = chain_scene(x, np.zeros((2, 3)), [m1, m2], [k], [rest])
    frame_dt, frames, substeps = 1.0 / 200.0, 200, 50
    traj = simulate(top, par, st, frames=frames, substeps=substeps, frame_dt=frame_dt)
    chain = traj.bodies["chain"]
    assert chain.x.shape == (frames + 1, 2, 3) and traj.particles.x.shape == (frames + 1, 0, 3)
    mu = m1 * m2 / (m1 + m2)
    t = np.arange(frames + 1) * frame_dt
    expected = rest + stretch * np.cos(math.sqrt(k / mu) * t)
    length = np.asarray(chain.x[:, 1, 0] - chain.x[:, 0, 0])
    np.testing.assert_allclose(length, expected, atol=2e-3 * stretch)
    momentum = np.asarray(m1 * chain.v[:, 0] + m2 * chain.v[:, 1])
    np.testing.assert_allclose(momentum, 0.0, atol=1e-9)


def test_chain_falls_with_the_scene_gravity_and_keeps_its_momentum_change_exact(chain_kind, x64):
    g = np.array([0.0, -9.81, 0.0])
    x = [[0.0, 1.0, 0.0], [0.4, 1.0, 0.0], [0.8, 1.1, 0.0]]
    v = [[0.1, 0.0, 0.0], [0.0, 0.2, 0.0], [0.0, 0.0, -0.3]]
    mass = np.array([1.0, 2.0, 0.5])
    top, par, st = chain_scene(x, v, mass, [300.0, 200.0], [0.4, 0.4], gravity=tuple(g))
    frame_dt, frames, substeps = 1.0 / 60.0, 30, 40
    traj = simulate(top, par, st, frames=frames, substeps=substeps, frame_dt=frame_dt)
    chain = traj.bodies["chain"]
    p = np.einsum("m,tmi->ti", mass, np.asarray(chain.v))
    t = np.arange(frames + 1) * frame_dt
    np.testing.assert_allclose(p, p[0] + mass.sum() * g * t[:, None], atol=1e-9)
    com = np.einsum("m,tmi->ti", mass, np.asarray(chain.x)) / mass.sum()
    # semi-implicit Euler's free fall: x0 + v0 T + g T^2 / 2 + g T dt / 2
    dt = frame_dt / substeps
    ballistic = com[0] + (p[0] / mass.sum()) * t[:, None] + g * (t[:, None] ** 2 / 2 + t[:, None] * dt / 2)
    np.testing.assert_allclose(com, ballistic, atol=1e-9)


def test_chain_runs_beside_particles_under_jit_and_grad(chain_kind):
    top, par, st = chain_scene([[0.0, 0.0, 0.0], [0.6, 0.0, 0.0]], np.zeros((2, 3)), [1.0, 1.0], [100.0], [0.5],
                               gravity=(0.0, -9.81, 0.0), others=[[0.0, 2.0, 0.0]])

    def final(ke):
        p = SpringChain().with_branch(par, ChainParams(mass=jnp.ones(2), ke=ke, rest=jnp.asarray([0.5])))
        traj = simulate(top, p, st, frames=5, substeps=4)
        x = traj.bodies["chain"].x[-1]
        return x[1, 0] - x[0, 0], traj.particles.x[-1, 0, 1]

    (length, height), grad = jax.jit(jax.value_and_grad(final, has_aux=True))(jnp.asarray([100.0]))
    assert np.isfinite(float(length)) and float(grad[0]) != 0.0
    assert float(height) < 2.0  # the particle falls beside the chain


def test_chain_check_names_the_field(chain_kind):
    top, par, st = chain_scene([[0.0, 0.0, 0.0], [0.6, 0.0, 0.0]], np.zeros((2, 3)), [1.0, -1.0], [100.0], [0.5])
    with pytest.raises(ValueError, match=r"Params.bodies\['chain'\].mass\[1\]"):
        simulate(top, par, st, frames=1, substeps=1)


def test_a_branch_of_an_unregistered_kind_is_refused():
    unregister_component("chain")  # (docs/architecture.md's example registers one in the same process)
    top, par, st = chain_scene([[0.0, 0.0, 0.0], [0.6, 0.0, 0.0]], np.zeros((2, 3)), [1.0, 1.0], [100.0], [0.5])
    with pytest.raises(ValueError, match=r"State.bodies has \['chain'\].*register_component"):
        simulate(top, par, st, frames=2, substeps=1)


def test_each_kind_says_whether_it_moves(chain_kind):
    """`BodyKind.moves`: what `sysid.Experiment` asks to refuse a recording where nothing moves."""
    kinds = {kind.name: kind for kind in COMPONENTS}
    top, par, st = chain_scene([[0.0, 0.0, 0.0], [0.6, 0.0, 0.0]], np.zeros((2, 3)), [1.0, 1.0], [100.0], [0.5],
                               others=np.zeros((1, 3)))
    moving = {name: kind.moves(top, par, st) for name, kind in kinds.items()}
    assert moving == {"ode": False, "smoke": False, "particles": True, "rigid": False, "colliders": False,
                      "chain": True}
    pinned = dataclasses.replace(top, particles=dataclasses.replace(top.particles,
                                                                    pinned=jnp.ones_like(top.particles.pinned)))
    assert not kinds["particles"].moves(pinned, par, st)
    assert not kinds["chain"].moves(dataclasses.replace(top, bodies=None), par, st)
