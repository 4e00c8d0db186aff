"""A body kind of one's own, end to end: a spring-mass chain, simulated, drawn, identified and read from scene
files, in this one module with one registry line (`register_body_kind` at the bottom).

A scene file loads it with `[scene] plugins = ["spring_chain.py"]` (chain.toml beside it), then adds a chain with
a [chain] section; `gradsim-jax render chain.toml --out target.gif` films it and `gradsim-jax fit chain.toml
--target target.gif` recovers its spring stiffness (the quantity chain_ke). docs/architecture.md ("Adding a
body kind") walks through the layers it touches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.component import ExtraBodyKind, RolloutOptions
from gradsim_jax.render.drawings import Drawing
from gradsim_jax.scenefile.extensions import BodyKindParts, BodySection, KindBranches, register_body_kind
from gradsim_jax.scenefile.schema import Field, SceneFileError
from gradsim_jax.sysid.registry import Quantity
from gradsim_jax.typing import Array, is_concrete, pytree_dataclass

NAME = "chain"


@pytree_dataclass
class ChainTopology:
    """pairs [s, 2] int32: the masses each spring joins; size [m] m: the half edge of the cube each is drawn as."""

    pairs: Array
    size: Array


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
    """Hooke forces of the springs on the masses (equal and opposite in each spring).

    Args:
        topology: the chain's `ChainTopology`.
        params: the chain's `ChainParams`.
        x: [m, 3] m, the masses' positions.

    Returns:
        [m, 3] N, the force on each mass.
    """
    i, j = topology.pairs[:, 0], topology.pairs[:, 1]
    d = x[j] - x[i]
    length = jnp.linalg.norm(d, axis=-1)
    f = (params.ke * (length - params.rest) / length)[:, None] * d
    return jnp.zeros_like(x).at[i].add(f).at[j].add(-f)


class SpringChain(ExtraBodyKind):
    """Physics: point masses joined by Hooke springs under the scene's gravity, semi-implicit Euler at the
    integrator's substeps; branches `Topology/Params/State.bodies["chain"]`."""

    name = NAME

    def check(self, topology, params, state, options):
        """ValueError naming the first mass that is not positive (concrete values only).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.
            options: the rollout's `RolloutOptions`.
        """
        if not is_concrete(self.branch(params)):  # inside jit: values unknown
            return
        mass = np.asarray(self.branch(params).mass)
        if not np.all(mass > 0):
            raise ValueError(f"Params.bodies['chain'].mass[{int(np.argmin(mass > 0))}] must be positive")

    def rollout(self, topology, params, state0, options: RolloutOptions, substeps: int):
        """The chain at every frame.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params` (the chain's branch and the world's gravity, m/s^2).
            state0: the chain's `ChainState` at frame 0.
            options: the rollout's `RolloutOptions` (frames, frame_dt s).
            substeps: steps a frame.

        Returns:
            `ChainState` with leaves [frames + 1, m, 3].
        """
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


def _cube():
    """(corners [8, 3] of the cube [-1, 1]^3, its 12 triangles [12, 3] wound counter-clockwise from outside)."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float32)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = []
    for a, b, c, d in quads:
        for t in ((a, b, c), (a, c, d)):
            p = corners[list(t)]
            outward = np.dot(np.cross(p[1] - p[0], p[2] - p[0]), p.mean(0)) > 0
            tris.append(t if outward else t[::-1])
    return corners, np.asarray(tris, np.int32)


CUBE_CORNERS, CUBE_FACES = _cube()


class ChainDrawing(Drawing):
    """Render: each mass a cube of half edge `size` around it."""

    name = NAME

    def vertices(self, topology, params, state):
        """The cubes' corners.

        Args:
            topology: the chain's `ChainTopology`.
            params: the chain's `ChainParams`.
            state: the chain's `ChainState` of one frame.

        Returns:
            [8 m, 3] m.
        """
        return (state.x[:, None, :] + topology.size[:, None, None] * CUBE_CORNERS[None]).reshape(-1, 3)

    def vertex_count(self, topology) -> int:
        """8 a mass.

        Args:
            topology: the chain's `ChainTopology`.

        Returns:
            8 m.
        """
        return 8 * int(np.shape(topology.size)[0])

    def faces(self, topology) -> np.ndarray:
        """12 triangles a mass.

        Args:
            topology: the chain's `ChainTopology`.

        Returns:
            [12 m, 3] int32.
        """
        m = int(np.shape(topology.size)[0])
        return (CUBE_FACES[None] + 8 * np.arange(m)[:, None, None]).reshape(-1, 3).astype(np.int32)


def _has_chain(topology) -> bool:
    return NAME in (topology.bodies or {})


#: Identification: the springs' stiffness, one value for every spring, fitted in log space.
CHAIN_KE = Quantity(
    "chain_ke", f"bodies.{NAME}.ke", "N/m", "log", ("chain_ke", f"bodies.{NAME}.ke"),
    "spring stiffness of the spring-mass chain",
    read=lambda topology, params, state0: float(np.asarray(params.bodies[NAME].ke).reshape(-1)[0]),
    expand=lambda exp, value: {f"bodies.{NAME}.ke": jnp.broadcast_to(value, exp.params.bodies[NAME].ke.shape)},
    applies=_has_chain)


#: The [chain] section of scene files.
CHAIN_FIELDS = {
    "n": Field("int", 3, "number of masses (at least 2), in a row along x"),
    "mass": Field("float", 0.5, "mass of each, kg"),
    "ke": Field("float", 20.0, "stiffness of each spring, N/m (quantity chain_ke)"),
    "rest": Field("float", 0.4, "rest length of each spring, m"),
    "stretch": Field("float", 1.0, "initial spacing over the rest length (1: at rest)"),
    "pos": Field("float[3]", [0.0, 0.0, 0.0], "centre of the row of masses, m"),
    "size": Field("float", 0.08, "half edge of the cube each mass is drawn as, m"),
}


def read_chain(section, spec) -> KindBranches:
    """[chain] as the chain's branches: `n` masses in a row along x, centred on `pos`, `stretch` x `rest` apart.

    Args:
        section: the [chain] record (its keys: `CHAIN_FIELDS`).
        spec: the `SceneSpec` (named in messages).

    Returns:
        The `KindBranches`.

    Raises:
        SceneFileError: for fewer than 2 masses or a mass, stiffness, length or size that is not positive.
    """
    if section.n < 2:
        raise SceneFileError(f"{spec.path}: [chain] n must be at least 2, got {section.n}")
    for key, value in (("mass", section.mass), ("ke", section.ke), ("rest", section.rest),
                       ("stretch", section.stretch), ("size", section.size)):
        if not value > 0:
            raise SceneFileError(f"{spec.path}: [chain] {key} must be positive, got {value}")
    m, s = section.n, section.n - 1
    offsets = (np.arange(m) - (m - 1) / 2) * section.rest * section.stretch
    x = np.asarray(section.pos, np.float32)[None] + offsets[:, None] * np.array([1.0, 0.0, 0.0], np.float32)
    return KindBranches(
        topology=ChainTopology(pairs=jnp.asarray([[k, k + 1] for k in range(s)], jnp.int32),
                               size=jnp.full((m,), section.size, jnp.float32)),
        params=ChainParams(mass=jnp.full((m,), section.mass, jnp.float32), ke=jnp.full((s,), section.ke, jnp.float32),
                           rest=jnp.full((s,), section.rest, jnp.float32)),
        state=ChainState(x=jnp.asarray(x, jnp.float32), v=jnp.zeros((m, 3), jnp.float32)))


CHAIN = BodyKindParts(kind=SpringChain(), drawing=ChainDrawing(), quantities=(CHAIN_KE,),
                      section=BodySection(NAME, CHAIN_FIELDS, read_chain, "a spring-mass chain (spring_chain.py)"))

register_body_kind(CHAIN)  # the registry line
