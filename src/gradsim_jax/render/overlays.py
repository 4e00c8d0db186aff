"""What a body kind composites over the rendered meshes (`Overlay`), found by the kind's name (`OVERLAYS`).

Some kinds are not drawn as triangles but filmed as a volume in front of the meshes: the smoke (`physics.smoke`)
is its density on a slab (`render.density.smoke_over`). An `Overlay` says, for the kind of its `name`, whether a
scene has one (`present`, from the topology alone), what of a rollout the camera films (`filmed`: the smoke's
density at every frame), how a recording films it (its look: `default_look`, checked by `check_look`; the
smoke's `SmokeLook`) and how that composites over a frame (`over`). `sysid.experiment.render_frames` loops over
the overlays of the kinds a scene has, in the order of `OVERLAYS`, instead of naming them.

A kind defined outside the package registers its own (`register_overlay`), as it registers its mesh drawing
(`render.drawings`).
"""

from __future__ import annotations

import abc
import collections.abc
from typing import Any

from gradsim_jax.render.density import SmokeLook, smoke_over
from gradsim_jax.typing import registered

Array = Any


class Overlay(abc.ABC):
    """What a body kind composites over the rendered meshes (module docstring); subclass it."""

    #: The body kind's name (`physics.component.BodyKind.name`).
    name: str = ""
    #: What `filmed` gives, in words (for errors: "density").
    data_name: str = "data"
    #: The state field `filmed` reads, as `SimulationDiverged` names it ("smoke.density").
    field: str = ""

    @abc.abstractmethod
    def present(self, topology) -> bool:
        """Whether the scene has a body of this kind (host side, static).

        Args:
            topology: the scene's `Topology`.

        Returns:
            A Python bool.
        """

    @abc.abstractmethod
    def filmed(self, topology, trajectory) -> Array:
        """What the camera films of the kind in a rollout; traceable.

        Args:
            topology: the scene's `Topology`.
            trajectory: the rollout's `State`, leaves [T, ...] (T frames).

        Returns:
            The kind's filmed data, leading axis T (the smoke: its density [T, ny, nx]).
        """

    @abc.abstractmethod
    def default_look(self):
        """The look a recording films the kind with when it gives none (static, hashable).

        Returns:
            The look.
        """

    def check_look(self, look) -> None:
        """Raise TypeError or ValueError for a look this overlay cannot film (the base accepts any).

        Args:
            look: the recording's look of the kind.
        """

    @abc.abstractmethod
    def over(self, camera, topology, data, image, look) -> Array:
        """One frame with the kind composited in front of `image`; traceable.

        Args:
            camera: the `render.camera.Camera` filming.
            topology: the scene's `Topology`.
            data: the kind's filmed data of that frame (`filmed`, one frame: no leading axis).
            image: [H, W, 4] the frame behind it (colours blended over their background, alpha the coverage).
            look: the recording's look of the kind (`check_look` passed).

        Returns:
            [H, W, 4] RGBA, the frame with the kind in front.
        """


class SmokeOverlay(Overlay):
    """The smoke (`Topology.smoke`): its density filmed as a slab in front of the meshes, as its `SmokeLook` says,
    as wide and tall as the grid (`render.density.smoke_over`)."""

    name = "smoke"
    data_name = "density"
    field = "smoke.density"

    def present(self, topology) -> bool:
        """Whether the scene has smoke.

        Args:
            topology: the scene's `Topology`.

        Returns:
            `topology.smoke is not None`.
        """
        return topology.smoke is not None

    def filmed(self, topology, trajectory) -> Array:
        """The smoke's density at every frame.

        Args:
            topology: the scene's `Topology`.
            trajectory: the rollout's `State`, leaves [T, ...].

        Returns:
            [T, ny, nx], the density.
        """
        return trajectory.smoke.density

    def default_look(self):
        """`SmokeLook()`: the slab's corner at the origin, the "smoke" colour map, scale 1.

        Returns:
            The `SmokeLook`.
        """
        return SmokeLook()

    def check_look(self, look) -> None:
        """TypeError unless `look` is a `SmokeLook`.

        Args:
            look: the recording's look of the smoke.
        """
        if not isinstance(look, SmokeLook):
            raise TypeError(f"Experiment.smoke_look must be a render.SmokeLook, got {type(look).__name__}")

    def over(self, camera, topology, data, image, look) -> Array:
        """`smoke_over` of one frame's density, the slab as wide and tall as the grid.

        Args:
            camera: the `Camera` filming.
            topology: the scene's `Topology` (the grid's shape and spacing).
            data: [ny, nx], the frame's density.
            image: [H, W, 4], the frame behind the smoke.
            look: the `SmokeLook`.

        Returns:
            [H, W, 4] RGBA.
        """
        ny, nx = topology.smoke.shape
        h = topology.smoke.spacing
        return smoke_over(camera, data, image, look, (nx * h, ny * h))


#: {kind name: its Overlay}, in the order they are composited (the first nearest the meshes).
OVERLAYS: dict[str, Overlay] = {"smoke": SmokeOverlay()}


def register_overlay(overlay: Overlay) -> Overlay:
    """Add `overlay` to `OVERLAYS` under its name (replacing the one of the same name, at the end).

    Args:
        overlay: the `Overlay`.

    Returns:
        `overlay`.
    """
    return registered(OVERLAYS, overlay.name, overlay, Overlay, "an overlay must be a render.overlays.Overlay",
                      last=True)


def unregister_overlay(name: str) -> None:
    """Remove the overlay of the kind called `name` (nothing when there is none).

    Args:
        name: the kind's name.
    """
    OVERLAYS.pop(name, None)


def present_overlays(topology) -> list[Overlay]:
    """The overlays of the kinds the scene has, in the order of `OVERLAYS`.

    Args:
        topology: the scene's `Topology`.

    Returns:
        A list of `Overlay`.
    """
    return [overlay for overlay in OVERLAYS.values() if overlay.present(topology)]


def scene_looks(topology, looks) -> dict:
    """The looks a recording films its overlay kinds with: `looks` (None values dropped), each overlay kind the
    scene has (`present_overlays`) given its default look when `looks` has none; every look of a
    kind with an overlay checked (`Overlay.check_look`).

    Args:
        topology: the scene's `Topology`.
        looks: {kind name: look} as given (None: none).

    Returns:
        {kind name: look}.
    """
    out = {name: look for name, look in dict(looks or {}).items() if look is not None}
    for overlay in present_overlays(topology):
        out.setdefault(overlay.name, overlay.default_look())
    for name, look in out.items():
        if name in OVERLAYS:
            OVERLAYS[name].check_look(look)
    return out


def overlay_data(kinds: list, overlays) -> dict:
    """{kind name: data} of the overlay kinds an experiment has, from what `sysid.experiment.render_frames` was
    given; ValueError for data of a kind it has not, or none for one it has.

    Args:
        kinds: the experiment's overlays (`present_overlays`).
        overlays: None, one kind's data (an array: the experiment's one overlay kind), or {kind name: data}.

    Returns:
        {kind name: data}, the kinds of `kinds`.
    """
    if overlays is not None and not isinstance(overlays, collections.abc.Mapping):
        if len(kinds) != 1:
            raise ValueError(f"render_frames: one overlay's data was given but the experiment has {len(kinds)} overlay "
                             "kinds (render.overlays): give {kind name: data}")
        overlays = {kinds[0].name: overlays}
    given = dict(overlays or {})
    names = {kind.name for kind in kinds}
    for name in given:
        if name not in names:
            raise ValueError(f"render_frames: data of {name!r} was given but the experiment has no {name} to film")
    for kind in kinds:
        if kind.name not in given:
            raise ValueError(f"render_frames: the experiment has {kind.name}: give its {kind.data_name} (`motion`) "
                             "with the vertices")
    return given
