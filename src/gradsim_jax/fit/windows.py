"""How a long recording is cut into windows for a windowed fit (`sysid.windows.windowed`): `Windows` (the frames of
each window, for multiple shooting and truncated backpropagation), `window_length_for` (a window length from
the gradient horizon that `gradsim-jax horizon` measures) and the `Scaled` transform of free start states.

Choosing the window length from the gradient horizon: let H be the horizon, in simulation steps, that
`gradsim-jax horizon` marks (`diagnostics.horizon`: the first horizon at which the float32 and float64
gradients differ by more than its tolerance, 10 %; past it both follow amplified rounding errors). For
gradSim's demo cloth H = 1440 steps by issue 12's table (1280 by the README's). Take windows of
`length = floor(H / (3 substeps))` frames (`window_length_for`, safety 1/3): 15 (13) frames for the demo. The
difference grows like exp(lambda t), so at H / 3 it is about (tol eps32^2)^(1/3) ~ 1e-5 of the gradient;
the margin covers guesses away from the truth, whose motion can be more chaotic than the truth's (a window
of H / 2 is the most to use). Shorter windows see less of each slow mode per gradient (truncated) or cost
more unknowns (multiple shooting: 6 per particle per window); longer ones cross the horizon. An overlap of
a few frames (default `length // 4`) lets each join of multiple shooting be seen by two windows' images.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.transforms import Transform

Array = Any


@dataclasses.dataclass(frozen=True)
class Windows:
    """How a recording of `frames` frames (after the initial state) is cut: windows of `length` frames,
    consecutive ones sharing `overlap` frames (`starts`: the first frame of each, host ints); every
    `stride`-th frame of a window (its frames 1, 1 + stride, ...) is compared with the target, as
    `sysid.make_loss`'s frame_stride does for the whole recording."""

    frames: int
    length: int
    overlap: int = 0
    stride: int = 1

    def __post_init__(self):
        for name, value, least in (("frames", self.frames, 1), ("length", self.length, 1), ("overlap", self.overlap, 0),
                                   ("stride", self.stride, 1)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
                raise ValueError(f"window {name} must be an integer >= {least}, got {value!r}")
        if self.length > self.frames:
            raise ValueError(f"window length {self.length} exceeds the recording's {self.frames} frames")
        if self.overlap >= self.length:
            raise ValueError(f"window overlap {self.overlap} must be smaller than the window length {self.length}")

    @property
    def starts(self) -> tuple[int, ...]:
        """First frame of each window: 0, length - overlap, 2 (length - overlap), ..., frames - length."""
        step = self.length - self.overlap
        starts = list(range(0, self.frames - self.length, step)) + [self.frames - self.length]
        return tuple(dict.fromkeys(starts))

    @property
    def count(self) -> int:
        return len(self.starts)

    def offsets(self) -> np.ndarray:
        """Frames of a window compared with the target, from its start: 1, 1 + stride, ... <= length."""
        return np.arange(1, self.length + 1, self.stride)

    def frame_index(self) -> np.ndarray:
        """[count, len(offsets)] target frame compared in each window."""
        return np.asarray(self.starts)[:, None] + self.offsets()[None, :]

    def cuts(self) -> tuple[int, ...]:
        """Frames where truncated backpropagation stops the gradient: length, 2 length, ... < frames."""
        return tuple(range(self.length, self.frames, self.length))


def window_length_for(horizon_steps: int, substeps: int, safety: float = 1.0 / 3.0) -> int:
    """Window length in frames for a gradient horizon of `horizon_steps` simulation steps (module docstring):
    floor(safety * horizon_steps / substeps), at least 1.

    Args:
        horizon_steps: the gradient horizon in simulation steps (positive int, `gradsim-jax horizon`).
        substeps: simulation steps per frame (positive int).
        safety: in (0, 1], the share of the horizon a window may span (1/3: module docstring; 1/2 at most).

    Returns:
        int >= 1, the window length in frames.
    """
    if not (isinstance(horizon_steps, (int, np.integer)) and horizon_steps >= 1):
        raise ValueError(f"horizon_steps must be a positive integer, got {horizon_steps!r}")
    if not (isinstance(substeps, (int, np.integer)) and substeps >= 1):
        raise ValueError(f"substeps must be a positive integer, got {substeps!r}")
    if not (0.0 < safety <= 1.0):
        raise ValueError(f"safety must lie in (0, 1], got {safety!r}")
    return max(1, int(math.floor(safety * horizon_steps / substeps)))


@dataclasses.dataclass(frozen=True)
class Scaled(Transform):
    """x = scale * u: an identity in units of `scale`, so that one optimizer step of size ~lr moves x by
    ~lr * scale (the window start states: metres and metres per second next to log-quantities)."""

    scale: float = 1.0
    name = "scaled"

    def __post_init__(self):
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"Scaled needs a positive finite scale, got {self.scale!r}")

    def forward(self, x: Array) -> Array:
        """Physical `x` -> unconstrained `u = x / scale`.

        Args:
            x: physical values, any shape, in the field's unit (m, m/s, ...).

        Returns:
            `u`, the same shape as `x`, in units of `scale`.
        """
        return jnp.asarray(x) / self.scale

    def inverse(self, u: Array) -> Array:
        """Unconstrained `u` -> physical `x = scale * u`.

        Args:
            u: unconstrained values, any shape, in units of `scale`.

        Returns:
            `x`, the same shape as `u`, in the field's unit.
        """
        return jnp.asarray(u) * self.scale

    def label(self, field: str) -> str:
        """Readable name of the unconstrained coordinate of `field`: "field/scale".

        Args:
            field: the field's name (dotted path).

        Returns:
            str, e.g. "x0/0.1".
        """
        return f"{field}/{self.scale:g}"


