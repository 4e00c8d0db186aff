"""How long a gradient stays informative: its norm and its float32/float64 agreement as functions of the
horizon, and the largest Lyapunov exponent of a motion.

`gradient_horizon` differentiates a vector of losses, one per horizon (the loss over the first t_k seconds
of the motion, k = 1..K), with respect to the free parameters, once in float64 and once in float32, and
reports per horizon |g64| and the relative difference r_k = |g32 - g64| / |g64|.

Criterion: the gradient stops being informative at the first horizon where r_k > tol (default 0.1: the
float32 gradient's direction is then off by about tol radians, and the float64 one, computed on the same
trajectory with rounding errors 2^29 times smaller, only a little better: past that point both follow the
amplification of rounding errors, not the physics). In a chaotic motion with largest Lyapunov exponent
lambda (1/s) a relative perturbation eps grows as eps e^(lambda t), so that horizon is predicted by
t* = ln(tol / eps32) / lambda, eps32 = 2^-24 = 6e-8 (`predicted_horizon`). The fitted growth rate of
ln |g64| with t is reported as a second estimate of lambda (a tangent of a chaotic flow grows at the same
rate).

`lyapunov_exponent` estimates lambda independently of any gradient: two trajectories a distance d0 apart,
renormalized to d0 after every step (Benettin et al. 1980), in float64.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import jit
from gradsim_jax.diagnostics.precision import at_precision, cast_floats, json_ready
from gradsim_jax.fit.transforms import field_names, get_field, replace_fields

Array = Any

#: Unit roundoff of float32 (2^-24): the relative size of one rounding error.
EPS32 = 2.0 ** -24
#: Default criterion: float32/float64 relative difference of the gradient beyond which it is not informative.
HORIZON_TOL = 0.1


def predicted_horizon(lyapunov: float, tol: float = HORIZON_TOL, eps: float = EPS32) -> float:
    """t* = ln(tol / eps) / lambda (s when lambda is in 1/s): when rounding errors of relative size eps have
    grown to tol; inf for lambda <= 0.

    Args:
        lyapunov: lambda, the largest Lyapunov exponent (1/s, or 1/frame).
        tol: the relative size at which the gradient is no longer informative.
        eps: the relative size of one rounding error (float32's unit roundoff by default).

    Returns:
        t*, in the inverse unit of lambda (s for 1/s); inf for lambda <= 0.
    """
    return math.log(tol / eps) / lyapunov if lyapunov > 0 else math.inf


@dataclasses.dataclass(frozen=True)
class HorizonResult:
    """Outcome of `gradient_horizon`.

    times: [K] the horizons (s, or frames when no frame time was given); norm64, norm32: [K] |dL_k/dtheta|
    in float64 and float32 (over all free fields, in the fields' units); relative_difference: [K]
    |g32 - g64| / |g64|; field_norms: {field: [K] |dL_k/dfield| in float64}; tol; horizon: the first horizon
    with relative_difference > tol (None: none); growth_rate: least-squares slope of ln(norm64) against
    times (1/s); growth_horizon: `predicted_horizon(growth_rate, tol)`; mode: "forward" or "reverse".
    """

    times: np.ndarray
    norm64: np.ndarray
    norm32: np.ndarray
    relative_difference: np.ndarray
    field_norms: dict
    tol: float
    horizon: Optional[float]
    growth_rate: float
    growth_horizon: float
    mode: str
    unit: str = "s"

    def as_dict(self) -> dict:
        """JSON-ready (non-finite numbers as None)."""
        return json_ready({
            "criterion": f"first horizon where |g32 - g64| / |g64| > {self.tol:g}",
            "horizon": self.horizon, "unit": self.unit, "tol": self.tol, "mode": self.mode,
            "growth_rate": self.growth_rate, "growth_horizon": _finite_or_none(self.growth_horizon),
            "table": [{"horizon": float(t), "norm64": float(a), "norm32": float(b), "relative_difference": float(r),
                       **{f"norm64[{n}]": float(v[k]) for n, v in self.field_norms.items()}}
                      for k, (t, a, b, r) in enumerate(zip(self.times, self.norm64, self.norm32,
                                                           self.relative_difference))],
        })

    def table(self) -> str:
        rows = [f"{'horizon [' + self.unit + ']':>12} {'|g64|':>11} {'|g32|':>11} {'f32-f64':>9}",
                "-" * 46]
        for t, a, b, r in zip(self.times, self.norm64, self.norm32, self.relative_difference):
            mark = "  <- not informative from here" if self.horizon is not None and t == self.horizon else ""
            rows.append(f"{t:>12.4g} {a:>11.4e} {b:>11.4e} {r:>9.2e}{mark}")
        where = "none within the horizons tried" if self.horizon is None else f"{self.horizon:.4g} {self.unit}"
        rows.append(f"gradient stops being informative (f32-f64 > {self.tol:g}) at: {where}")
        rows.append(f"|g64| growth rate (slope of ln |g64|): {self.growth_rate:.3g} /{self.unit}; where the norm grows "
                    f"exponentially this estimates the Lyapunov exponent, and ln(tol / eps32) / rate = "
                    f"{self.growth_horizon:.3g} {self.unit}")
        return "\n".join(rows)

    def write_json(self, path) -> None:
        """Write `as_dict()` to `path` as JSON (`sysid.outputs.report.write_report`, atomically).

        Args:
            path: the JSON file to write.
        """
        from gradsim_jax.sysid.outputs.report import write_report

        write_report(path, self.as_dict())

    def plot(self, path) -> None:
        """Two panels against the horizon: |g| (float64, float32) and the float32/float64 difference, with the
        tolerance and the marked horizon.

        Args:
            path: the PNG file to write.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        from gradsim_jax.sysid.outputs.plots import save_figure

        fig = Figure(figsize=(6, 6), dpi=100)
        FigureCanvasAgg(fig)
        top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
        tiny = np.finfo(np.float64).tiny
        top.semilogy(self.times, np.maximum(self.norm64, tiny), label="float64")
        top.semilogy(self.times, np.maximum(self.norm32, tiny), "--", label="float32")
        top.set_ylabel("gradient norm")
        top.legend()
        bottom.semilogy(self.times, np.maximum(self.relative_difference, 1e-12), color="C2")
        bottom.axhline(self.tol, color="k", ls=":", label=f"tolerance {self.tol:g}")
        bottom.set_ylabel("|g32 - g64| / |g64|")
        bottom.set_xlabel(f"horizon [{self.unit}]")
        for ax in (top, bottom):
            if self.horizon is not None:
                ax.axvline(self.horizon, color="C3", ls="--", label="not informative from here")
            ax.grid(True, alpha=0.3)
        bottom.legend()
        fig.tight_layout()
        save_figure(fig, path)


def _finite_or_none(x: float):
    return float(x) if math.isfinite(x) else None


def _jacobian(fn, params, free, mode):
    """[K, n] Jacobian of fn(params) [K] w.r.t. the free fields (flattened, in `free` order), jitted with the
    parameters as arguments. One pass per column (forward: a jvp per free scalar) or per row (reverse: a vjp
    per horizon), run one after the other by `lax.map`: the memory of a single pass."""
    x = {n: get_field(params, n) for n in free}
    flat, unravel = jax.flatten_util.ravel_pytree(x)

    def of(p, z):
        return fn(replace_fields(p, unravel(z)))

    def jacobian(p, z):
        if mode == "forward":
            cols = jax.lax.map(lambda t: jax.jvp(lambda zz: of(p, zz), (z,), (t,))[1], jnp.eye(z.size, dtype=z.dtype))
            return cols.T
        out, pullback = jax.vjp(lambda zz: of(p, zz), z)
        return jax.lax.map(lambda c: pullback(c)[0], jnp.eye(out.size, dtype=out.dtype))

    return np.asarray(jit(jacobian)(params, flat), np.float64)


def gradient_horizon(
    horizon_losses: Callable[[Any], Array],
    params: Any,
    *,
    free: Optional[tuple[str, ...]] = None,
    times=None,
    unit: str = "s",
    tol: float = HORIZON_TOL,
    mode: str = "auto",
    horizon_losses_forward: Optional[Callable[[Any], Array]] = None,
    progress: bool = False,
) -> HorizonResult:
    """Gradient norm and float32/float64 agreement against the horizon (see the module docstring).

    Args:
      horizon_losses: `horizon_losses(params) -> [K]`, the loss over the first k-th horizon for each k (e.g.
        the mean image loss of the frames up to frame k); must compute in the dtype of its parameters.
      params: dict or dataclass tree (physical units); floating leaves are cast to float64 and float32.
      free: fields to differentiate (None: every floating-point field).
      times: [K] the horizons, increasing (default 1..K); `unit` names their unit.
      unit: the unit of `times` ("s"; "frames" for frame counts), for the table and the plot.
      tol: the criterion (module docstring).
      mode: "forward" (jacfwd: one pass per free scalar; cheap for a few scalars and many horizons),
        "reverse" (jacrev: one pass per horizon) or "auto" (forward when there are at most as many free
        scalars as horizons).
      horizon_losses_forward: the same losses for forward mode (a renderer without a custom VJP).
      progress: print a line per precision.
    Returns:
      HorizonResult.
    Raises:
      ValueError: bad arguments; a non-finite float64 loss or gradient.
    """
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError(f"mode must be auto, forward or reverse, got {mode!r}")
    if not (math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    names = field_names(params)
    if free is None:
        free = tuple(n for n in names if jnp.issubdtype(jnp.result_type(get_field(params, n)), jnp.floating))
    free = (free,) if isinstance(free, str) else tuple(free)
    if not free or any(n not in names for n in free):
        raise ValueError(f"free must name fields of the parameters {list(names)}; got {list(free)}")
    n_scalars = sum(int(np.size(get_field(params, n))) for n in free)
    say = print if progress else (lambda *_: None)
    results = {}
    for bits in (64, 32):
        with at_precision(bits) as dtype:
            p = cast_floats(params, dtype)
            num = int(np.size(jax.eval_shape(horizon_losses, p)))
            if num < 1:
                raise ValueError("horizon_losses returned no loss")
            chosen = mode if mode != "auto" else ("forward" if n_scalars <= num else "reverse")
            fn = horizon_losses_forward if chosen == "forward" and horizon_losses_forward is not None \
                else horizon_losses
            say(f"horizon: {chosen}-mode Jacobian of {num} horizon losses, float{bits}")
            results[bits] = _jacobian(fn, p, free, chosen)
    j64, j32 = results[64], results[32]
    if not np.all(np.isfinite(j64)):
        raise ValueError("the float64 gradient is not finite at some horizon: the simulation diverges")
    k = j64.shape[0]
    t = np.arange(1, k + 1, dtype=np.float64) if times is None else np.asarray(times, np.float64)
    if t.shape != (k,) or np.any(np.diff(t) <= 0):
        raise ValueError(f"times must be {k} increasing values, got shape {t.shape}")
    norm64 = np.linalg.norm(j64, axis=1)
    norm32 = np.linalg.norm(j32, axis=1)
    diff = np.linalg.norm(j32 - j64, axis=1)
    rel = np.where(np.isfinite(diff), diff / np.maximum(norm64, np.finfo(np.float64).tiny), np.inf)
    rel = np.where(diff == 0, 0.0, rel)
    bad = np.nonzero(rel > tol)[0]
    horizon = float(t[bad[0]]) if bad.size else None
    sizes = [int(np.size(get_field(params, n))) for n in free]
    offsets = np.cumsum([0] + sizes)
    field_norms = {n: np.linalg.norm(j64[:, offsets[i]:offsets[i + 1]], axis=1) for i, n in enumerate(free)}
    ok = norm64 > 0
    rate = float(np.polyfit(t[ok], np.log(norm64[ok]), 1)[0]) if ok.sum() >= 2 else float("nan")
    return HorizonResult(times=t, norm64=norm64, norm32=norm32, relative_difference=rel, field_norms=field_norms,
                         tol=float(tol), horizon=horizon, growth_rate=rate,
                         growth_horizon=predicted_horizon(rate, tol) if math.isfinite(rate) else math.inf,
                         mode=chosen, unit=unit)


def lyapunov_exponent(advance: Callable[[Any], Any], state: Any, *, steps: int, dt: float, d0: float = 1e-8,
                      seed: int = 0, transient: int = 0) -> float:
    """Largest Lyapunov exponent (1/time unit of `dt`) of the map `advance` by Benettin's method in float64.

    Args:
        advance: `advance(state) -> state` after `dt`; a pure function of a float pytree (jit-compatible).
        state: the starting state; cast to float64.
        steps: renormalizations (each after one `advance`).
        dt: the time one `advance` covers (s, or any time unit: the result is per that unit).
        d0: the separation kept (L2 over all leaves, the state's units).
        seed: the seed of the random direction of the initial separation.
        transient: steps run before measuring.

    Returns:
        the exponent, per time unit of `dt` (1/s for dt in s).
    """
    if steps < 1 or dt <= 0 or d0 <= 0:
        raise ValueError(f"need steps >= 1, dt > 0, d0 > 0; got {steps}, {dt}, {d0}")
    with at_precision(64) as f64:
        state = cast_floats(state, f64)
        leaves, tree = jax.tree_util.tree_flatten(state)
        rng = np.random.default_rng(seed)
        offset = [rng.normal(size=np.shape(x)) for x in leaves]
        scale = d0 / math.sqrt(sum(float(np.sum(o ** 2)) for o in offset))
        other = jax.tree_util.tree_unflatten(tree, [x + scale * o for x, o in zip(leaves, offset)])

        def renormalize(a, b):
            delta = jax.tree_util.tree_map(lambda u, v: v - u, a, b)
            d = jnp.sqrt(sum(jnp.sum(x ** 2) for x in jax.tree_util.tree_leaves(delta)))
            b = jax.tree_util.tree_map(lambda u, e: u + e * (d0 / d), a, delta)
            return b, jnp.log(d / d0)

        def body(carry, _):
            a, b = carry
            a, b = advance(a), advance(b)
            b, growth = renormalize(a, b)
            return (a, b), growth

        run = jit(lambda a, b, n: jax.lax.scan(body, (a, b), None, length=n), static_argnums=2)
        carry = (state, other)
        if transient:
            carry, _ = run(*carry, transient)
        _, growth = run(*carry, steps)
        return float(jnp.sum(growth)) / (steps * dt)
