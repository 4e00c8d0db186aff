"""[smoke]: a scene file's smoke on a grid (`physics.smoke`, built by `geometry.smoke`) as a `Scene` piece, and
how it is filmed (`render.SmokeLook`): `read_smoke` -> `SmokeParts`."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.smoke import box_mask, disc_mask, smoke_grid
from gradsim_jax.render import SmokeLook
from gradsim_jax.scenefile.schema import SceneFileError


@dataclasses.dataclass(frozen=True)
class SmokeParts:
    """[smoke] read.

    Attributes:
        piece: the host-side `Scene` piece of the smoke grid (`geometry.smoke.smoke_grid`).
        look: the `render.SmokeLook` (the grid's corner in m, colour map, scale).
        substeps: solver steps per frame.
    """

    piece: object
    look: SmokeLook
    substeps: int

    @property
    def looks(self) -> dict:
        """{"smoke": look}: the experiment's looks of its overlay kinds (`sysid.experiment.Experiment.looks`)."""
        return {"smoke": self.look}

    @property
    def kind_options(self) -> dict:
        """{"smoke_substeps": substeps}: the smoke's keyword of `physics.simulate` (`Experiment.kind_options`)."""
        return {"smoke_substeps": self.substeps}


def read_smoke(spec):
    """The file's smoke, or None without a [smoke] table (its required key, cells, not given); the one reader
    of the section.

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `SmokeParts`, or None.

    Raises:
        SceneFileError: naming the key, for a bad value.
    """
    s = spec.sections.smoke
    if s.cells is None:
        return None
    return SmokeParts(piece=_smoke_piece(spec.path, s), look=_smoke_look(spec.path, s), substeps=int(s.substeps))


def _smoke_piece(path, s):
    """The smoke grid's `Scene` piece of the [smoke] record `s` (SceneFileError naming `path` and the key)."""
    cells = tuple(s.cells)
    if len(cells) != 2 or min(cells) < 2:
        raise SceneFileError(f"{path}: [smoke] cells must be [ny, nx], each at least 2, got {list(cells)}")
    if not (np.isfinite(s.width) and s.width > 0):
        raise SceneFileError(f"{path}: [smoke] width must be a positive length (m), got {s.width}")
    if s.substeps < 1:
        raise SceneFileError(f"{path}: [smoke] substeps must be at least 1, got {s.substeps}")
    regions = {"source": s.source, "fill_box": s.fill_box, "fill_disc": s.fill_disc}
    for key in ("source", "fill_disc"):
        if regions[key] is not None and not regions[key][2] > 0:
            raise SceneFileError(f"{path}: [smoke] {key} = [x, y, radius] needs a positive radius, got {regions[key]}")
    if s.fill_box is not None and not (s.fill_box[0] < s.fill_box[2] and s.fill_box[1] < s.fill_box[3]):
        raise SceneFileError(f"{path}: [smoke] fill_box = [x0, y0, x1, y1] needs x0 < x1 and y0 < y1, got "
                             f"{s.fill_box}")
    masks = {key: (disc_mask(cells, region[:2], region[2]) if key != "fill_box" else
                   box_mask(cells, region[:2], region[2:])) for key, region in regions.items() if region is not None}
    for key, mask in masks.items():
        if not mask.any():
            raise SceneFileError(f"{path}: [smoke] {key} = {regions[key]} covers no cell's centre of the {cells[0]} x "
                                 f"{cells[1]} grid (coordinates are in units of the width from its bottom-left "
                                 "corner)")
    fill = np.maximum(masks.get("fill_box", np.zeros(cells)), masks.get("fill_disc", np.zeros(cells)))
    inflow = masks.get("source")
    try:
        return smoke_grid(cells, spacing=s.width / cells[1], walls=s.walls, advection=s.advection,
                          solver=s.solver, tolerance=s.tolerance, slip=s.slip, buoyancy=s.buoyancy,
                          dissipation=s.dissipation, vorticity=s.vorticity, inflow_rate=s.inflow_rate,
                          inflow_mask=inflow, density=fill * s.fill_density)
    except ValueError as e:
        raise SceneFileError(f"{path}: [smoke] {e}") from None


def _smoke_look(path, s) -> SmokeLook:
    """The `render.SmokeLook` of the [smoke] record `s` (SceneFileError naming `path`)."""
    corner = s.corner if s.corner is not None else (-0.5 * s.width, 0.0, 0.0)
    try:
        return SmokeLook(corner=tuple(corner), colormap=s.colormap, scale=s.scale)
    except ValueError as e:
        raise SceneFileError(f"{path}: [smoke] {e}") from None
