"""What a body kind defined outside the package draws (`Drawing`), found by the kind's name (`DRAWINGS`).

A kind whose branches live in the trees' `bodies` dicts (`physics.component.ExtraBodyKind`) is drawn by the
`Drawing` registered under its name: `vertices` [v, 3] m from its branches of one state (traceable), and, from
its topology branch alone (host side, static), their number `vertex_count` and the `faces` [f, 3] int32 over them.
`render.mesh.scene_vertices` and `scene_faces` put them after the colliders' (before an ODE body's), kind by kind
in the order of `Topology.bodies`; a kind with no drawing is not drawn.
"""

from __future__ import annotations

import abc

import numpy as np

from gradsim_jax.typing import registered


class Drawing(abc.ABC):
    """The mesh a body kind is drawn as (module docstring); subclass it."""

    #: The body kind's name (its key in `Topology.bodies`, `Params.bodies`, `State.bodies`).
    name: str = ""

    @abc.abstractmethod
    def vertices(self, topology, params, state):
        """The kind's render vertices in one state; traceable.

        Args:
            topology: the kind's branch of `Topology.bodies`.
            params: the kind's branch of `Params.bodies`.
            state: the kind's branch of one `State.bodies` (no leading frame axis).

        Returns:
            [v, 3] m, vertices indexed by `faces` (v fixed by the topology).
        """

    @abc.abstractmethod
    def vertex_count(self, topology) -> int:
        """How many vertices `vertices` gives (host side).

        Args:
            topology: the kind's branch of `Topology.bodies`.

        Returns:
            v, a Python int.
        """

    @abc.abstractmethod
    def faces(self, topology) -> np.ndarray:
        """The kind's triangles over its own vertices (host side).

        Args:
            topology: the kind's branch of `Topology.bodies`.

        Returns:
            [f, 3] int32, indices into `vertices` (counter-clockwise seen from outside).
        """


#: {kind name: its Drawing}.
DRAWINGS: dict[str, Drawing] = {}


def register_drawing(drawing: Drawing) -> Drawing:
    """Add `drawing` to `DRAWINGS` under its name (replacing the one of the same name).

    Args:
        drawing: the `Drawing`.

    Returns:
        `drawing`.
    """
    return registered(DRAWINGS, drawing.name, drawing, Drawing, "a drawing must be a render.drawings.Drawing")


def unregister_drawing(name: str) -> None:
    """Remove the drawing of the kind called `name` (nothing when there is none).

    Args:
        name: the kind's name.
    """
    DRAWINGS.pop(name, None)


def drawn_kinds(topology) -> list[str]:
    """The kinds of `Topology.bodies` that have a drawing, in the order of that dict.

    Args:
        topology: the scene's `Topology`.

    Returns:
        The kinds' names.
    """
    return [name for name in (topology.bodies or {}) if name in DRAWINGS]


def drawn_faces(topology, offset: int) -> tuple[list[np.ndarray], int]:
    """The drawn kinds' faces over the scene's vertices, theirs starting at vertex `offset` (host side).

    Args:
        topology: the scene's `Topology`.
        offset: the index of the first drawn kind's first vertex among the scene's vertices.

    Returns:
        ([f_k, 3] int32 faces of each drawn kind, offset by the vertices before them; the index after the last
        drawn kind's vertices).
    """
    parts = []
    for name in drawn_kinds(topology):
        drawing, branch = DRAWINGS[name], topology.bodies[name]
        parts.append(np.asarray(drawing.faces(branch), np.int32).reshape(-1, 3) + offset)
        offset += int(drawing.vertex_count(branch))
    return parts, offset
