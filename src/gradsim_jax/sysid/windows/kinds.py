"""What each body kind gives a windowed fit (`sysid.windows`): the parts of the state a window's start frees
(`StartPart`, in `START_PARTS`) and the kinds a windowed fit refuses (`WindowRefusal`, in `WINDOW_REFUSALS`).

A start part is a piece of the state that multiple shooting frees at each window's start, as a pose and a rate
(two theta entries, [count - 1, ...]): the particles' positions and velocities ("x": START_X, START_V), an ODE
body's coordinates and their rates ("q", `physics.ode.ode_coordinates`: START_Q, START_QD). It says whether an
experiment has it (`present`), reads and writes it (`pose_rate`, `with_pose_rate`), the period of its pose
(`period`: an angle's, so that a join is measured on the circle), the size of one unit of its pose fit
(`scale`), and refuses multiple shooting it cannot do (`check_multiple`).

A kind whose start cannot be read off the video (the smoke: a whole velocity field) registers a refusal under its
body kind's name (`physics.components.COMPONENTS`): the windowed fit of a scene that has that kind stops with its
message (`refusal`).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.components import COMPONENTS
from gradsim_jax.physics.ode import ode_coordinates, with_ode_coordinates
from gradsim_jax.sysid.experiment import Experiment
from gradsim_jax.typing import registered

#: theta entries of the free window start states (windows 1, 2, ...): particle positions and velocities
#: [count - 1, n, 3] m, m/s; an ODE body's pose and rate [count - 1, ...] (its own units).
START_X = "_window_x"
START_V = "_window_v"
START_Q = "_window_q"
START_QD = "_window_qd"


class StartPart(abc.ABC):
    """A part of the state a window's start frees (module docstring); subclass it."""

    #: The part's key in the {part: pose} dicts ("x", "q").
    key: str = ""
    #: The theta entries of its pose and rate at windows 1, 2, ...
    entries: tuple = ()

    @abc.abstractmethod
    def present(self, exp: Experiment) -> bool:
        """Whether the experiment has this part.

        Args:
            exp: the experiment.

        Returns:
            A Python bool.
        """

    @abc.abstractmethod
    def pose_rate(self, exp: Experiment, state):
        """(pose, rate) of the part in a state; works on states with leading axes.

        Args:
            exp: the experiment.
            state: the `State`, leaves [..., ...] with any leading axes.

        Returns:
            (pose, rate), arrays with the state's leading axes.
        """

    @abc.abstractmethod
    def with_pose_rate(self, exp: Experiment, state, pose, rate):
        """`state` (no leading axis) with the part's pose and rate replaced.

        Args:
            exp: the experiment.
            state: the `State`.
            pose: the part's pose.
            rate: the part's rate, as pose.

        Returns:
            The `State`.
        """

    def period(self, exp: Experiment):
        """The period of the pose coordinates (the base: None, not periodic).

        Args:
            exp: the experiment.

        Returns:
            None, a number or an array of periods per coordinate (0: not periodic).
        """
        return None

    @abc.abstractmethod
    def scale(self, exp: Experiment) -> float:
        """The size of one unit of the pose fit and of the join penalty, in the pose's unit.

        Args:
            exp: the experiment.

        Returns:
            A positive float.
        """

    def check_multiple(self, exp: Experiment) -> None:
        """Raise ValueError when multiple shooting cannot free this part (the base: it can).

        Args:
            exp: the experiment.
        """


class ParticlePart(StartPart):
    """"x": the particles' positions and velocities, [n, 3] m and m/s; pinned and massless particles keep theirs."""

    key = "x"
    entries = (START_X, START_V)

    def present(self, exp: Experiment) -> bool:
        """Whether the scene has particles.

        Args:
            exp: the experiment.

        Returns:
            A Python bool.
        """
        return bool(int(np.shape(exp.state0.particles.x)[0]))

    def pose_rate(self, exp: Experiment, state):
        """The particles' positions and velocities.

        Args:
            exp: the experiment.
            state: the `State`, any leading axes.

        Returns:
            ([..., n, 3] m, [..., n, 3] m/s).
        """
        return state.particles.x, state.particles.v

    def with_pose_rate(self, exp: Experiment, state, pose, rate):
        """The state with the movable particles' (`movable`) positions and velocities replaced.

        Args:
            exp: the experiment.
            state: the `State`.
            pose: [n, 3] m, positions.
            rate: [n, 3] m/s, velocities.

        Returns:
            The `State`.
        """
        keep = movable(exp)
        particles = dataclasses.replace(state.particles, x=jnp.where(keep, pose, state.particles.x),
                                        v=jnp.where(keep, rate, state.particles.v))
        return dataclasses.replace(state, particles=particles)

    def scale(self, exp: Experiment) -> float:
        """1 % of the initial state's bounding-box diagonal.

        Args:
            exp: the experiment.

        Returns:
            m.
        """
        x = np.asarray(exp.state0.particles.x, np.float64)
        return 0.01 * max(float(np.linalg.norm(x.max(0) - x.min(0))), 1e-6)


class OdePart(StartPart):
    """"q": an ODE body's coordinates and their rates (`physics.ode.ode_coordinates`), in its own units."""

    key = "q"
    entries = (START_Q, START_QD)

    def present(self, exp: Experiment) -> bool:
        """Whether the experiment has an ODE body (its topology and its initial state both hold one).

        Args:
            exp: the experiment.

        Returns:
            A Python bool.
        """
        return exp.topology.ode is not None and exp.state0.ode is not None

    def pose_rate(self, exp: Experiment, state):
        """`ode_coordinates` of the state's ODE body.

        Args:
            exp: the experiment.
            state: the `State`, any leading axes.

        Returns:
            (pose, rate) in the body's own units (rad, m; per s).
        """
        return ode_coordinates(exp.topology.ode.system, state.ode)

    def with_pose_rate(self, exp: Experiment, state, pose, rate):
        """The state with the ODE body's coordinates replaced (`with_ode_coordinates`).

        Args:
            exp: the experiment.
            state: the `State`.
            pose: the body's coordinates.
            rate: their rates.

        Returns:
            The `State`.
        """
        return dataclasses.replace(state, ode=with_ode_coordinates(exp.topology.ode.system, state.ode, pose, rate))

    def period(self, exp: Experiment):
        """The system's `OdeSystem.pose_period` (angles).

        Args:
            exp: the experiment.

        Returns:
            The period, or None.
        """
        return exp.topology.ode.system.pose_period

    def scale(self, exp: Experiment) -> float:
        """0.01 of the body's own unit.

        Args:
            exp: the experiment.

        Returns:
            0.01 (rad, m).
        """
        return 0.01

    def check_multiple(self, exp: Experiment) -> None:
        """ValueError when the body's system names no coordinates (`ode_coordinates`).

        Args:
            exp: the experiment.
        """
        ode_coordinates(exp.topology.ode.system, exp.state0.ode)


def movable(exp: Experiment):
    """[n, 1] bool: particles a start state may move (not pinned, positive mass); traceable.

    Args:
      exp: the experiment (its particles' pins and masses).

    Returns:
      [n, 1] bool.
    """
    return (~exp.topology.particles.pinned & (exp.params.particles.mass > 0))[:, None]


#: {part key: its StartPart}, in the order of the parts (the particles first).
START_PARTS: dict[str, StartPart] = {"x": ParticlePart(), "q": OdePart()}
#: (pose, rate) theta entries per part: "x" the particles, "q" the ODE body (kept with `START_PARTS`).
PARTS: dict[str, tuple] = {key: part.entries for key, part in START_PARTS.items()}


def register_start_part(part: StartPart) -> StartPart:
    """Add `part` to `START_PARTS` and its entries to `PARTS` under its key (replacing one of the same key).

    Args:
        part: the `StartPart`.

    Returns:
        `part`.
    """
    registered(START_PARTS, part.key, part, StartPart, "a start part must be a sysid.windows.kinds.StartPart")
    PARTS[part.key] = tuple(part.entries)
    return part


@dataclasses.dataclass(frozen=True)
class WindowRefusal:
    """Why a windowed fit refuses a body kind.

    kind: the body kind's name (`physics.component.BodyKind.name`); where: its branch of the trees, as the
    message names it ("Topology.smoke"); reason: why, for `check_windowed`; file_reason: why, for the scene file's
    [fit] window (`scenefile.job`).
    """

    kind: str
    where: str
    reason: str
    file_reason: str


#: {body kind name: its WindowRefusal}.
WINDOW_REFUSALS: dict[str, WindowRefusal] = {
    "smoke": WindowRefusal(
        "smoke", "Topology.smoke",
        "its state is a whole velocity field, which a window's start cannot be estimated for from the video; fit the "
        "whole recording (no window)",
        "a window's start would be a whole velocity field, which the video does not show; fit the whole recording"),
}


def register_window_refusal(refusal: WindowRefusal) -> WindowRefusal:
    """Add `refusal` to `WINDOW_REFUSALS` under its kind's name (replacing the one of the same name).

    Args:
        refusal: the `WindowRefusal`.

    Returns:
        `refusal`.
    """
    return registered(WINDOW_REFUSALS, refusal.kind, refusal, WindowRefusal,
                      "a window refusal must be a sysid.windows.kinds.WindowRefusal")


def refusal(exp: Experiment) -> Optional[WindowRefusal]:
    """The refusal of the first registered body kind (`COMPONENTS` order) the experiment has that a windowed fit
    refuses, or None.

    Args:
        exp: the experiment.

    Returns:
        The `WindowRefusal`, or None.
    """
    for kind in COMPONENTS:
        if kind.name in WINDOW_REFUSALS and kind.present(exp.topology, exp.params, exp.state0):
            return WINDOW_REFUSALS[kind.name]
    return None
