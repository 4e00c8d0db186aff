"""The loss and its gradient over a 1-D or 2-D grid of scalar quantities around an estimate, as gradSim's
loss-landscape figures show them.

The grid points are evaluated by `jax.lax.map` over chunks of `batch_size` points, each chunk `vmap`ped: the
memory of one chunk's `value_and_grad`, whatever the number of points. Values are relative offsets of the
centre: q_i = centre * (1 + s_i), s_i evenly spaced in [-span, span] (`relative_grid`), so that quantities
of different units share a plot; the gradient is reported in physical units (dL/dq); the 2-D plot draws its
downhill direction in the plot's own (axis-fraction) coordinates.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import jit
from gradsim_jax.fit.transforms import field_names, get_field, replace_fields

Array = Any


def relative_grid(span: float, points: int) -> np.ndarray:
    """[points] relative offsets evenly spaced in [-span, span]; span in (0, 1) keeps a positive centre
    positive.

    Args:
        span: the largest relative offset, in (0, 1) (0.5: +-50 % of the centre).
        points: the number of offsets (an integer >= 2).

    Returns:
        numpy [points] relative offsets s_i (a value is centre * (1 + s_i)).
    """
    if not (math.isfinite(span) and 0 < span < 1):
        raise ValueError(f"span must be in (0, 1) (a relative offset), got {span!r}")
    if not isinstance(points, (int, np.integer)) or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    return np.linspace(-span, span, int(points))


@dataclasses.dataclass(frozen=True)
class Landscape:
    """Loss and gradient on a grid.

    names: the varied fields (1 or 2); centre: {name: value}; axes: [points] values of each field (physical
    units); loss: [n1] or [n1, n2] (index order: names); grad: [..., len(names)] dL/dq per field (loss units
    per field unit); truth: {name: value} or None (marked on the plot).
    """

    names: tuple
    centre: dict
    axes: tuple
    loss: np.ndarray
    grad: np.ndarray
    truth: Optional[dict] = None

    @property
    def diverged(self) -> int:
        """Grid points whose loss is not finite (the simulation blew up there, e.g. too light or too stiff
        for its time step)."""
        return int(np.sum(~np.isfinite(self.loss)))

    def as_dict(self) -> dict:
        """JSON-ready: non-finite values (diverged points) as None."""
        clean = lambda a: np.where(np.isfinite(a), a, None).tolist()  # noqa: E731
        return {"vary": list(self.names), "centre": dict(self.centre), "truth": self.truth,
                "axes": {n: a.tolist() for n, a in zip(self.names, self.axes)},
                "loss": clean(self.loss), "gradient": {n: clean(self.grad[..., i]) for i, n in enumerate(self.names)},
                "diverged_points": self.diverged, "minimum": self.minimum()}

    def minimum(self) -> Optional[dict]:
        """The grid point of least loss: {name: value, "loss": value}; None when no loss is finite."""
        if self.diverged == self.loss.size:
            return None
        idx = np.unravel_index(int(np.nanargmin(np.where(np.isfinite(self.loss), self.loss, np.nan))),
                               self.loss.shape)
        out = {n: float(a[i]) for n, a, i in zip(self.names, self.axes, idx)}
        out["loss"] = float(self.loss[idx])
        return out

    def write_json(self, path) -> None:
        """Write `as_dict()` to `path` as JSON (`sysid.outputs.report.write_report`, atomically).

        Args:
            path: the JSON file to write.
        """
        from gradsim_jax.sysid.outputs.report import write_report

        write_report(path, self.as_dict())

    def plot(self, path) -> None:
        """1-D: the loss and dL/dq against q (two panels). 2-D: log10 loss as filled contours with the
        downhill direction of the gradient as arrows of equal length; the centre (+) and the truth (x) marked;
        diverged points left grey.

        Args:
            path: the PNG file to write.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        from gradsim_jax.sysid.outputs.plots import save_figure

        if len(self.names) == 1:
            fig = Figure(figsize=(6, 6), dpi=100)
            FigureCanvasAgg(fig)
            top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2, sharex=None)
            (name,), (axis,) = self.names, self.axes
            top.plot(axis, self.loss, "o-", ms=3)
            top.set_ylabel("loss")
            bottom.plot(axis, self.grad[:, 0], "o-", ms=3, color="C1")
            bottom.axhline(0.0, color="k", lw=0.8)
            bottom.set_ylabel(f"dL/d{name}")
            bottom.set_xlabel(name)
            for ax in (top, bottom):
                ax.axvline(self.centre[name], color="C2", ls="--", label="centre")
                if self.truth is not None:
                    ax.axvline(self.truth[name], color="k", ls=":", label="true")
                ax.grid(True, alpha=0.3)
            top.legend()
        else:
            fig = Figure(figsize=(6.5, 5.5), dpi=100)
            FigureCanvasAgg(fig)
            ax = fig.add_subplot(1, 1, 1)
            ax.set_facecolor("0.85")  # where the loss is not finite, contourf leaves the background
            (nx, ny), (ax_x, ax_y) = self.names, self.axes
            value = np.log10(np.maximum(self.loss, np.finfo(np.float64).tiny)).T  # [n2, n1]: rows are y
            filled = ax.contourf(ax_x, ax_y, value, levels=20, cmap="viridis")
            fig.colorbar(filled, ax=ax, label="log10 loss")
            # Downhill directions as arrows of equal length on the page: the gradient w.r.t. the plot's
            # fractional coordinates (dL/dq times the axis range), normalized, mapped back to data units.
            span_x, span_y = float(ax_x[-1] - ax_x[0]), float(ax_y[-1] - ax_y[0])
            fx, fy = -self.grad[..., 0].T * span_x, -self.grad[..., 1].T * span_y
            norm = np.hypot(fx, fy)
            unit = np.where(norm > 0, 0.045 / np.maximum(norm, np.finfo(np.float64).tiny), 0.0)
            step = max(1, len(ax_x) // 12)
            X, Y = np.meshgrid(ax_x, ax_y)
            pick = (slice(None, None, step), slice(None, None, step))
            ax.quiver(X[pick], Y[pick], (fx * unit * span_x)[pick], (fy * unit * span_y)[pick], color="w",
                      angles="xy", scale_units="xy", scale=1.0, pivot="mid", alpha=0.85, width=0.004)
            ax.plot([self.centre[nx]], [self.centre[ny]], "+", color="r", ms=12, mew=2, label="centre")
            if self.truth is not None:
                ax.plot([self.truth[nx]], [self.truth[ny]], "x", color="k", ms=10, mew=2, label="true")
            ax.set_xlim(ax_x[0], ax_x[-1])  # the grid, even when the truth lies outside it
            ax.set_ylim(ax_y[0], ax_y[-1])
            ax.set_xlabel(nx)
            ax.set_ylabel(ny)
            ax.legend(loc="upper right")
        if self.diverged:
            fig.suptitle(f"{self.diverged} of {self.loss.size} points diverged (non-finite loss: "
                         f"{'grey' if len(self.names) == 2 else 'gaps'})", fontsize=9)
        fig.tight_layout()
        save_figure(fig, path)


def loss_landscape(
    loss: Callable[[Any], Array],
    params: Any,
    vary: dict,
    *,
    batch_size: int = 16,
    truth: Optional[dict] = None,
) -> Landscape:
    """Loss and gradient of `loss` over the grid `vary` ({field: [points] values}, one or two scalar
    fields; the product grid for two) with the other fields of `params` as given.

    Args:
      loss: scalar loss of the parameter tree (dict or dataclass tree).
      params: the parameters; `vary`'s fields must be scalars in it.
      vary: {field: values}, 1 or 2 entries, each a 1-D array of at least 2 finite values.
      batch_size: grid points evaluated together by `vmap` (the memory of this many gradients).
      truth: values to mark on the plot.
    Returns:
      Landscape (centre: the fields' values in `params`).
    Raises:
      ValueError: bad fields, values or batch size.
    """
    names = tuple(vary)
    if len(names) not in (1, 2):
        raise ValueError(f"vary one or two quantities, got {len(names)}: {list(names)}")
    known = field_names(params)
    for n in names:
        if n not in known:
            raise ValueError(f"unknown field {n!r}; the parameters have {list(known)}")
        if np.ndim(get_field(params, n)) != 0:
            raise ValueError(f"{n!r} is not a scalar (shape {np.shape(get_field(params, n))}): a landscape varies "
                             "scalar quantities")
    axes = tuple(np.asarray(vary[n], np.float64) for n in names)
    for n, a in zip(names, axes):
        if a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)):
            raise ValueError(f"values of {n!r} must be a 1-D array of at least 2 finite numbers")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    grids = np.meshgrid(*axes, indexing="ij")
    dtype = jnp.result_type(get_field(params, names[0]))
    points = jnp.asarray(np.stack([g.ravel() for g in grids], axis=-1), dtype)  # [P, len(names)]

    def at(p, point):
        return loss(replace_fields(p, {n: point[i] for i, n in enumerate(names)}))

    def evaluate(p, pts):
        return jax.lax.map(lambda pt: jax.value_and_grad(at, argnums=1)(p, pt), pts, batch_size=int(batch_size))

    values, grads = jit(evaluate)(params, points)
    shape = tuple(a.size for a in axes)
    return Landscape(names=names, centre={n: float(get_field(params, n)) for n in names}, axes=axes,
                     loss=np.asarray(values, np.float64).reshape(shape),
                     grad=np.asarray(grads, np.float64).reshape(shape + (len(names),)),
                     truth=None if truth is None else {n: float(np.asarray(truth[n])) for n in names})
