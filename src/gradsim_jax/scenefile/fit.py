"""[fit]: the quantities to estimate and how (`read_fit` -> `FitConfig`), checked before a target is loaded."""

from __future__ import annotations

import dataclasses
import math

from gradsim_jax.render.blur import BLUR_MAX
from gradsim_jax.sysid import LOSSES, FitConfig, canonical
from gradsim_jax.scenefile.schema import SceneFileError


@dataclasses.dataclass(frozen=True)
class FitSettings:
    """[fit] read.

    Attributes:
        config: the `FitConfig` (see `read_fit`).
        edges_given: the edge settings among blur and edge_model that [fit] sets (the others take the job's
            default: "auto", or "off" and "fixed" for a target rendered from [material]).
    """

    config: FitConfig
    edges_given: frozenset


def read_fit(spec) -> FitConfig:
    """[fit] checked and read as a `FitConfig` (before a target is loaded): `read_fit_settings(spec).config`.

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `FitConfig`: free quantities under their canonical names, loss ("auto" unless given), and the
        settings [fit] gives (blur, edge_model, shooting only when given).

    Raises:
        SceneFileError: naming the file and the [fit] key, for an unknown quantity or a bad setting.
    """
    return read_fit_settings(spec).config


def read_fit_settings(spec) -> FitSettings:
    """[fit] checked and read (the one reader of the section).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `FitSettings`: the `FitConfig` (`read_fit`) and which edge settings the file gives.

    Raises:
        SceneFileError: naming the file and the [fit] key, for an unknown quantity or a bad setting.
    """
    f = spec.sections.fit
    try:
        free = tuple(canonical(n) for n in f.free)
    except ValueError as e:
        raise SceneFileError(f"{spec.path}: [fit] free: {e}") from None
    if not free:
        raise SceneFileError(f"{spec.path}: [fit] free must name at least one quantity")
    if f.loss is not None and f.loss not in LOSSES:
        raise SceneFileError(f"{spec.path}: [fit] loss must be one of {LOSSES}, got {f.loss!r}")
    for key, value, least in (("iterations", f.iterations, 0), ("polish", f.polish, 0),
                              ("frame_stride", f.frame_stride, 1), ("horizon", f.horizon, 1), ("window", f.window, 1),
                              ("rounds", f.rounds, 1), ("round_iterations", f.round_iterations, 1),
                              ("density_first", f.density_first, 0)):
        if value is not None and value < least:
            allowed = "0 or more" if least == 0 else f"at least {least}"
            raise SceneFileError(f"{spec.path}: [fit] {key} must be {allowed}, got {value}")
    if not (math.isfinite(f.learning_rate) and f.learning_rate > 0):
        raise SceneFileError(f"{spec.path}: [fit] learning_rate must be a positive number (a negative one "
                             f"climbs the loss), got {f.learning_rate}")
    if f.blur is not None and not (f.blur in ("auto", "fit", "off") or (
            not isinstance(f.blur, str) and 0.0 <= f.blur <= BLUR_MAX)):
        raise SceneFileError(f'{spec.path}: [fit] blur must be "auto", "fit", "off" or a width in pixels in [0, '
                             f'{BLUR_MAX:g}], got {f.blur!r}')
    if f.shooting is not None and f.shooting not in ("truncated", "multiple"):
        raise SceneFileError(f'{spec.path}: [fit] shooting must be "truncated" or "multiple", got {f.shooting!r}')
    if f.shooting == "multiple" and f.window is None:
        raise SceneFileError(f"{spec.path}: [fit] shooting = \"multiple\" needs window (frames per window)")
    if f.edge_model is not None and f.edge_model not in ("auto", "fixed"):
        raise SceneFileError(f'{spec.path}: [fit] edge_model must be "auto" or "fixed", got {f.edge_model!r}')
    if not (math.isfinite(f.density_learning_rate) and f.density_learning_rate > 0):
        raise SceneFileError(f"{spec.path}: [fit] density_learning_rate must be a positive number, got "
                             f"{f.density_learning_rate}")
    if f.density_first and "particle_mass" not in free:
        raise SceneFileError(f"{spec.path}: [fit] density_first fits a density field before every particle's "
                             f"mass: particle_mass must be in free")
    optional = {"blur": f.blur, "edge_model": f.edge_model, "shooting": f.shooting}  # passed only when given
    config = FitConfig(free=free, iterations=f.iterations, learning_rate=f.learning_rate, loss=f.loss or "auto",
                       frame_stride=f.frame_stride, horizon=f.horizon, polish=f.polish,
                       window=f.window, rounds=f.rounds, round_iterations=f.round_iterations,
                       density_first=f.density_first, density_learning_rate=f.density_learning_rate,
                       **{k: v for k, v in optional.items() if v is not None})
    return FitSettings(config, frozenset(k for k in ("blur", "edge_model") if optional[k] is not None))
