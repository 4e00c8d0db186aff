"""Gradients you can trust: reverse mode against forward mode against central finite differences in
float64, and float32 against float64, per free quantity, with a verdict.

For every free field q of the parameters (a dict key or a dotted path of a dataclass tree), a direction d_q is
drawn once (seeded; d = 1 for a scalar, a unit Gaussian vector for an array) and the directional derivative
dL/dq . d_q is computed three ways in float64:

  reverse         <grad L, d_q>, one reverse pass (`jax.grad`) for all quantities;
  forward         `jax.jvp` with tangent d_q (n/a for a loss that uses a `jax.custom_vjp`, which has no
                  forward rule: then only reverse against finite differences is checked);
  central FD      (L(q + h d_q) - L(q - h d_q)) / (2 h).

FD step: h = eps64^(1/3) * max(rms(q), 1e-12), eps64 = 2.2e-16 (h = 6.1e-6 relative): the step that balances
the central difference's truncation error O(h^2 L''') against its rounding error O(eps |L| / h). The rounding
part sets the absolute floor of that comparison, 100 eps |L| / h: a derivative smaller than it cannot be
resolved by finite differences and counts as 0.

Float32: the whole gradient of q, computed in float32 (parameters cast, x64 off), against the float64 one:
|g32 - g64| / |g64| (L2).

Verdict per quantity (default tolerances, all relative): "ok" when |reverse - forward| <= ad_rtol (1e-6: two
exact evaluations of one derivative differ only by rounding), |reverse - FD| <= fd_rtol (1e-4: the FD's
truncation and rounding errors are ~1e-10 of the derivative for a smooth loss) and the float32 difference <=
f32_rtol (0.1, the criterion of `gradient_horizon`: beyond it the float32 gradient's direction is off by more
than about 0.1 rad); otherwise the failed checks are named. A wrong custom gradient fails the first two, a
chaotic or ill-conditioned horizon the last one (see `gradient_horizon`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import jit
from gradsim_jax.diagnostics.precision import at_precision, cast_floats, json_ready, relative_difference
from gradsim_jax.fit.transforms import field_names, get_field, replace_fields

Array = Any

#: Default tolerances (relative); see the module docstring.
AD_RTOL, FD_RTOL, F32_RTOL = 1e-6, 1e-4, 0.1
EPS64 = float(np.finfo(np.float64).eps)


@dataclasses.dataclass(frozen=True)
class QuantityCheck:
    """The checks of one free quantity.

    name: the field; size: its number of elements; step: the FD step h (the field's units);
    reverse, forward, finite_difference: the directional derivative dL/dq . d (loss units per field unit;
    forward None when forward mode is not available); gradient_norm: |dL/dq| in float64; float32_norm: in float32
    (None when not computed); ad_error, fd_error, f32_error: relative differences (None when not computed);
    verdict: "ok" or the failed checks, e.g. "FAIL: reverse vs FD"; note: why a check is missing.
    """

    name: str
    size: int
    step: float
    reverse: float
    forward: Optional[float]
    finite_difference: float
    gradient_norm: float
    float32_norm: Optional[float]
    ad_error: Optional[float]
    fd_error: float
    f32_error: Optional[float]
    verdict: str
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


@dataclasses.dataclass(frozen=True)
class GradcheckResult:
    """Outcome of `gradcheck`: the loss (float64) at the parameters, one `QuantityCheck` per free quantity,
    the tolerances used, and `ok` (every verdict "ok")."""

    loss: float
    checks: tuple
    tolerances: dict

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict:
        """JSON-ready (non-finite numbers as None)."""
        return json_ready({"loss": self.loss, "ok": self.ok, "tolerances": dict(self.tolerances),
                           "quantities": [dataclasses.asdict(c) for c in self.checks]})

    def table(self) -> str:
        """A plain-text table, one row per quantity."""
        head = (f"{'quantity':<14} {'size':>5} {'reverse':>12} {'forward':>12} {'central FD':>12} "
                f"{'rev-fwd':>8} {'rev-FD':>8} {'f32-f64':>8}  verdict")
        fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
        rows = [head, "-" * len(head)]
        for c in self.checks:
            rows.append(f"{c.name:<14} {c.size:>5} {c.reverse:>12.5e} {fmt(c.forward, '>12.5e'):>12} "
                        f"{c.finite_difference:>12.5e} {fmt(c.ad_error, '>8.1e'):>8} {c.fd_error:>8.1e} "
                        f"{fmt(c.f32_error, '>8.1e'):>8}  {c.verdict}" + (f" ({c.note})" if c.note else ""))
        t = self.tolerances
        rows.append(f"tolerances: rev-fwd {t['ad_rtol']:g}, rev-FD {t['fd_rtol']:g}, f32-f64 {t['f32_rtol']:g} "
                    f"(relative); loss {self.loss:.6e}")
        return "\n".join(rows)

    def write_json(self, path) -> None:
        """Write `as_dict()` as JSON (`sysid.outputs.report.write_report`).

        Args:
          path: the file to write.
        """
        from gradsim_jax.sysid.outputs.report import write_report

        write_report(path, self.as_dict())


def _directions(params: Any, free: tuple[str, ...], seed: int) -> dict:
    """A unit direction per free field (numpy float64, the field's shape); 1 for a scalar."""
    rng = np.random.default_rng(seed)
    out = {}
    for n in free:
        shape = np.shape(get_field(params, n))
        d = np.ones(shape) if int(np.prod(shape)) == 1 else rng.normal(size=shape)
        out[n] = d / np.linalg.norm(d)
    return out


def _fd_step(value, step: Optional[float]) -> float:
    if step is not None:
        return float(step)
    rms = float(np.sqrt(np.mean(np.square(np.asarray(value, np.float64))))) if np.size(value) else 0.0
    return EPS64 ** (1.0 / 3.0) * max(rms, 1e-12) if rms > 0 else EPS64 ** (1.0 / 3.0)


def _checked_free(params: Any, free, steps: Optional[dict], tolerances: dict) -> tuple:
    """(free fields as a tuple, {field: FD step}) after checking the tolerances, the free fields and the steps."""
    for label, tol in tolerances.items():
        if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
            raise ValueError(f"{label} must be a positive number, got {tol!r}")
    names = field_names(params)
    if free is None:
        free = tuple(n for n in names if jnp.issubdtype(jnp.result_type(get_field(params, n)), jnp.floating))
    free = (free,) if isinstance(free, str) else tuple(free)
    unknown = [n for n in free if n not in names]
    if unknown or not free:
        raise ValueError(f"free must name fields of the parameters {list(names)}; got {list(free)}")
    for n in free:
        if not jnp.issubdtype(jnp.result_type(get_field(params, n)), jnp.floating):
            raise ValueError(f"free field {n!r} is not floating point")
    steps = dict(steps or {})
    bad = [n for n, h in steps.items() if n not in free or not (math.isfinite(h) and h > 0)]
    if bad:
        raise ValueError(f"steps must give positive finite steps of free fields; bad: {bad}")
    return free, steps


def _say(progress: bool, started: float, stage: str) -> None:
    """With progress, print the stage and the seconds since `started` (`time.perf_counter()`)."""
    if progress:
        print(f"gradcheck: {stage} ({time.perf_counter() - started:.1f} s)")


def _split(p: Any, free: tuple) -> dict:
    """{field: value} of the free fields of the parameter tree p."""
    return {n: get_field(p, n) for n in free}


def _scalar(fn: Callable, p: Any, x: dict):
    """fn of p with the free fields x, checked to be a scalar."""
    out = fn(replace_fields(p, x))
    if jnp.shape(out) != ():
        raise ValueError(f"the loss must return a scalar; got shape {jnp.shape(out)}")
    return out


@dataclasses.dataclass(frozen=True)
class _Float64:
    """The float64 derivatives of `gradcheck`.

    Attributes:
      value: the loss at the parameters.
      grads: {field: reverse-mode gradient, the field's shape}.
      forward: {field: forward-mode directional derivative}, None when forward mode is not available.
      note: why forward mode is missing ("" when it is not).
      fd: {field: central finite-difference directional derivative}.
    """
    value: float
    grads: dict
    forward: Optional[dict]
    note: str
    fd: dict


def _forward_mode(loss_forward: Callable, p64: Any, x64: dict, tangents: dict, free: tuple) -> tuple:
    """({field: jvp along its tangent}, "") or (None, the reason) when the loss has no forward-mode rule."""
    forward = {}
    try:
        jvp = jit(lambda p, x, t: jax.jvp(lambda xx: _scalar(loss_forward, p, xx), (x,), (t,))[1])
        zero = {n: jnp.zeros_like(v) for n, v in tangents.items()}
        for n in free:
            forward[n] = float(jvp(p64, x64, {**zero, n: tangents[n]}))
    except TypeError as e:  # a custom_vjp has no forward-mode rule
        if "custom_vjp" not in str(e) and "jvp" not in str(e):
            raise
        return None, "forward mode n/a: the loss uses a custom_vjp"
    return forward, ""


def _float64_derivatives(loss: Callable, loss_forward: Callable, params: Any, free: tuple, directions: dict,
                         h: dict, say: Callable) -> _Float64:
    """Reverse mode, forward mode and central finite differences in float64 (`say(stage)` before each)."""
    with at_precision(64) as f64:
        p64 = cast_floats(params, f64)
        x64 = _split(p64, free)
        value_and_grad = jit(jax.value_and_grad(lambda p, x: _scalar(loss, p, x), argnums=1))
        evaluate = jit(lambda p, x: _scalar(loss, p, x))
        say("reverse mode, float64")
        value, grads = value_and_grad(p64, x64)
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"the loss is not finite at the parameters: {value}")
        grads = {n: np.asarray(g, np.float64) for n, g in grads.items()}
        tangents = {n: jnp.asarray(directions[n], f64) for n in free}
        say("forward mode, float64")
        forward, note = _forward_mode(loss_forward, p64, x64, tangents, free)
        say("central finite differences, float64")
        fd = {}
        for n in free:
            up = {**x64, n: x64[n] + h[n] * tangents[n]}
            down = {**x64, n: x64[n] - h[n] * tangents[n]}
            fd[n] = (float(evaluate(p64, up)) - float(evaluate(p64, down))) / (2.0 * h[n])
    return _Float64(value, grads, forward, note, fd)


def _float32_gradient(loss32: Callable, params: Any, free: tuple) -> dict:
    """{field: the reverse-mode gradient computed in float32, as float64}."""
    with at_precision(32) as f32:
        p32 = cast_floats(params, f32)
        _, g = jit(jax.value_and_grad(lambda p, x: _scalar(loss32, p, x), argnums=1))(p32, _split(p32, free))
        return {n: np.asarray(v, np.float64) for n, v in g.items()}


def _quantity_check(n: str, d: _Float64, direction, h: float, g32: Optional[dict],
                    tolerances: dict) -> QuantityCheck:
    """The `QuantityCheck` of field n from the derivatives along its `direction` with FD step h."""
    grad = d.grads[n]
    rev = float(np.sum(grad * direction))
    fwd = None if d.forward is None else d.forward[n]
    floor = 100.0 * EPS64 * abs(d.value) / h
    ad_err = None if fwd is None else relative_difference(rev, fwd)
    fd_err = relative_difference(rev, d.fd[n], floor)
    f32_err = None if g32 is None else relative_difference(g32[n], grad)
    failed = []
    if ad_err is not None and not ad_err <= tolerances["ad_rtol"]:
        failed.append("reverse vs forward")
    if not fd_err <= tolerances["fd_rtol"]:
        failed.append("reverse vs FD")
    if f32_err is not None and not f32_err <= tolerances["f32_rtol"]:
        failed.append("float32 vs float64")
    return QuantityCheck(
        name=n, size=int(np.size(grad)), step=h, reverse=rev, forward=fwd, finite_difference=d.fd[n],
        gradient_norm=float(np.linalg.norm(grad)),
        float32_norm=None if g32 is None else float(np.linalg.norm(g32[n])),
        ad_error=ad_err, fd_error=fd_err, f32_error=f32_err,
        verdict="ok" if not failed else "FAIL: " + ", ".join(failed), note=d.note)


def gradcheck(
    loss: Callable[[Any], Array],
    params: Any,
    *,
    free: Optional[tuple[str, ...]] = None,
    loss_forward: Optional[Callable[[Any], Array]] = None,
    loss32: Optional[Callable[[Any], Array]] = None,
    float32: bool = True,
    ad_rtol: float = AD_RTOL,
    fd_rtol: float = FD_RTOL,
    f32_rtol: float = F32_RTOL,
    steps: Optional[dict] = None,
    seed: int = 0,
    progress: bool = False,
) -> GradcheckResult:
    """Check the gradient of `loss` at `params` for every free quantity (see the module docstring).

    Args:
      loss: scalar loss of the parameter tree; must compute in the dtype of its parameters (arrays it uses
        travel in `params` or are made from them, not float32 constants closed over).
      params: a dict of arrays or a dataclass tree (dotted paths), physical units; evaluated with every
        floating-point leaf cast to float64 (and to float32 for the float32 comparison).
      free: fields to check; None: every floating-point field.
      loss_forward: the same loss written for forward mode (e.g. through a renderer with no custom VJP);
        default `loss`.
      loss32: the loss evaluated for the float32 comparison; default `loss`.
      float32: compare the float32 gradient with the float64 one.
      ad_rtol: tolerance (relative) of reverse vs forward mode.
      fd_rtol: tolerance (relative) of reverse mode vs central finite differences.
      f32_rtol: tolerance (relative) of the float32 gradient vs the float64 one.
      steps: {field: FD step} overriding the default h.
      seed: seed of the directions.
      progress: print a line per stage (compilation of a large loss takes a while).
    Returns:
      GradcheckResult (`.ok`, `.table()`, `.as_dict()`).
    Raises:
      ValueError: unknown or non-floating free fields, non-positive tolerances or steps, a loss that is not a
        scalar or not finite at `params`.
    """
    tolerances = {"ad_rtol": ad_rtol, "fd_rtol": fd_rtol, "f32_rtol": f32_rtol}
    free, steps = _checked_free(params, free, steps, tolerances)
    say = functools.partial(_say, progress, time.perf_counter())
    loss_forward = loss if loss_forward is None else loss_forward
    loss32 = loss if loss32 is None else loss32
    directions = _directions(params, free, seed)
    h = {n: _fd_step(get_field(params, n), steps.get(n)) for n in free}
    derivatives = _float64_derivatives(loss, loss_forward, params, free, directions, h, say)
    g32 = None
    if float32:
        say("reverse mode, float32")
        g32 = _float32_gradient(loss32, params, free)
    checks = tuple(_quantity_check(n, derivatives, directions[n], h[n], g32, tolerances) for n in free)
    return GradcheckResult(loss=derivatives.value, checks=checks, tolerances=tolerances)
