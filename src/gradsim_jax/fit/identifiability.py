"""Which parameters can the data determine? A Gauss-Newton / Laplace report at a fitted solution.

For a least-squares problem with residuals r(z) (z the free parameters in their unconstrained, "scaled"
coordinates: log for positive quantities), the Gauss-Newton matrix J^T J (J = dr/dz, [N, P]) is the
curvature of 0.5 |r|^2 near the solution. Its eigenvectors with (relatively) tiny eigenvalues are
directions along which the residual does not change: parameter combinations the data cannot separate.
In log coordinates such a direction reads as a product or ratio, e.g. "+0.71 log(mass) -0.71 log(k)"
means only k / mass is determined (an oscillator's frequency), a common situation in system
identification from video (Bard, "Nonlinear Parameter Estimation", 1974, ch. 7).

The Laplace approximation gives the covariance sigma^2 (J^T J)^-1 of the scaled parameters, with
sigma^2 = |r|^2 / (N - P) estimated from the residual unless the noise level is known. Parameters that
take part in an unidentifiable combination get an infinite standard error; the others use the inverse
on the identifiable subspace. Standard errors in log coordinates are relative errors; `stderr_physical`
maps them to physical units to first order (delta method).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import jit
from gradsim_jax.fit.transforms import TransformSpec, resolve_free, to_physical, to_unconstrained

Array = Any

#: jacfwd (P forward passes) up to this many free scalars, jacrev (N backward passes) beyond.
JACFWD_MAX_PARAMS = 64
#: eigenvector entries smaller than this are left out of a readable combination.
COMBINATION_MIN_WEIGHT = 0.05


@dataclasses.dataclass(frozen=True)
class IdentifiabilityReport:
    """Result of `gauss_newton_report`; P = number of free scalars, N = number of residuals.

    labels: [P] names of the scaled coordinates, e.g. "log(mass)", "log(k[2])", "x0".
    values: [P] physical values at the solution.
    residuals: [N] residual vector at the solution.
    jacobian: [N, P] d residual / d scaled parameters.
    jtj: [P, P] Gauss-Newton matrix J^T J.
    eigenvalues: [P] of J^T J, ascending; eigenvectors: [P, P], column k for eigenvalues[k].
    condition_number: max / min eigenvalue of J^T J (inf when singular; nan, with every other number, when the
      Jacobian is not finite); the square of cond(J).
    unidentifiable: readable combinations (one per eigenvalue <= rtol * max), e.g.
      "+0.71 log(mass) -0.71 log(k)"; empty when every parameter is determined.
    sigma2: residual variance used for the errors (nan when N <= P and none was given).
    stderr: [P] standard errors of the scaled parameters (inf for unidentified ones).
    stderr_physical: [P] the same in physical units (first order).
    """

    labels: tuple[str, ...]
    values: np.ndarray
    residuals: np.ndarray
    jacobian: np.ndarray
    jtj: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    condition_number: float
    unidentifiable: tuple[str, ...]
    sigma2: float
    stderr: np.ndarray
    stderr_physical: np.ndarray

    @property
    def identifiable(self) -> bool:
        """True when no parameter combination was flagged (False when the Jacobian was not finite: unknown)."""
        return not self.unidentifiable and not np.isnan(self.condition_number)

    def __str__(self) -> str:
        width = max(len(s) for s in self.labels)
        lines = [
            f"Gauss-Newton report: {len(self.residuals)} residuals, {len(self.labels)} parameters, "
            f"cond(J^T J) = {self.condition_number:.3g}, sigma^2 = {self.sigma2:.3g}",
            f"  {'parameter':<{width}}  {'value':>11}  {'stderr (scaled)':>15}  {'stderr':>11}",
        ]
        for lab, v, s, sp in zip(self.labels, self.values, self.stderr, self.stderr_physical):
            lines.append(f"  {lab:<{width}}  {v:>11.4g}  {s:>15.3g}  {sp:>11.3g}")
        if np.isnan(self.condition_number):
            lines.append("  the Jacobian is not finite (the simulation blew up near the estimate): nothing is known")
        if self.unidentifiable:
            lines.append("  not separable by the data:")
            lines.extend(f"    {c}" for c in self.unidentifiable)
        return "\n".join(lines)


def scalar_labels(name: str, shape: tuple[int, ...], label: Callable[[str], str]) -> list[str]:
    """One label per scalar of a field, in C (row-major) order: label("k[0,1]"), ...; label(name) for a scalar.

    Args:
        name: the field's name (dotted path).
        shape: the field's shape (() for a scalar).
        label: name -> its readable label, e.g. a `Transform.label` ("log(k[2])").

    Returns:
        list of str, prod(shape) labels.
    """
    if not shape:
        return [label(name)]
    return [
        label(f"{name}[{','.join(str(i) for i in np.unravel_index(k, shape))}]") for k in range(int(np.prod(shape)))
    ]


def _combination(vector: np.ndarray, labels: tuple[str, ...]) -> str:
    """"+0.71 log(a) -0.71 log(b)": an eigenvector with its sign fixed so its largest entry is positive."""
    v = vector * np.sign(vector[np.argmax(np.abs(vector))])
    return " ".join(f"{c:+.2f} {lab}" for c, lab in zip(v, labels) if abs(c) >= COMBINATION_MIN_WEIGHT)


def gauss_newton_report(
    residual_fn: Callable[[Any], Array],
    params: Any,
    free: Optional[tuple[str, ...]] = None,
    transforms: Optional[dict[str, TransformSpec]] = None,
    *,
    rtol: float = 1e-6,
    sigma2: Optional[float] = None,
) -> IdentifiabilityReport:
    """Local identifiability and Laplace standard errors of the free parameters at `params`.

    Args:
      residual_fn: physical parameter tree -> residuals (any shape; flattened), e.g. pred - target video.
      params: the solution (a fit's `result.params`), registered dataclass or dict.
      free: the fields to analyse (None: every floating-point field), as in `fit`.
      transforms: as in `fit`; "log" for positive fields gives the scale-free coordinates this report is
        meant for.
      rtol: eigenvalues of J^T J at or below `rtol * max eigenvalue` are flagged as unidentifiable
        (1e-6: singular values of J 1000x below the largest).
      sigma2: known residual (noise) variance; None estimates |r|^2 / (N - P).
    Returns:
      IdentifiabilityReport (its str is a readable table).
    """
    tf = resolve_free(params, free, transforms)
    u0 = to_unconstrained(params, tf)
    shapes = {n: u0[n].shape for n in tf}
    sizes = {n: int(np.prod(shapes[n])) for n in tf}
    z0 = jnp.concatenate([jnp.ravel(u0[n]) for n in tf])
    num_params = z0.size

    def residuals(z, params):
        u, offset = {}, 0
        for n in tf:
            u[n] = z[offset : offset + sizes[n]].reshape(shapes[n]).astype(u0[n].dtype)
            offset += sizes[n]
        r = jnp.ravel(residual_fn(to_physical(params, u, tf)))
        return r, r

    jacobian_fn = jax.jacfwd if num_params <= JACFWD_MAX_PARAMS else jax.jacrev
    # jit at the boundary: the residual usually wraps a whole rollout and render. params is an argument, so
    # that its arrays are data of the program rather than constants folded into it.
    jac, r = jit(jacobian_fn(residuals, has_aux=True))(z0, params)
    labels = tuple(lab for n, t in tf.items() for lab in scalar_labels(n, shapes[n], t.label))
    values = np.concatenate([np.ravel(np.asarray(tf[n].inverse(u0[n]), np.float64)) for n in tf])
    # Transforms are elementwise, so the Jacobian of z -> x is diagonal: one jvp with ones gives it.
    dxdz = np.concatenate(
        [np.ravel(np.asarray(jax.jvp(tf[n].inverse, (u0[n],), (jnp.ones_like(u0[n]),))[1], np.float64)) for n in tf]
    )
    return report_from_jacobian(jac, r, labels, values, dxdz, rtol=rtol, sigma2=sigma2)


def _physical_stderr(stderr, dxdz):
    """Standard errors in physical units, |dx/dz| stderr; an unbounded one (inf) stays unbounded also where the
    transform's slope is 0 (a positive quantity driven to 0, where exp or softplus underflows): 0 x inf is no
    number, and the quantity is no better known for it."""
    slope = np.abs(np.asarray(dxdz, np.float64))
    return np.where(np.isinf(stderr), np.inf, stderr * np.where(np.isinf(stderr), 1.0, slope))


def report_from_jacobian(jacobian, residuals, labels, values, dxdz, *, rtol: float = 1e-6,
                         sigma2: Optional[float] = None) -> IdentifiabilityReport:
    """The report from a Jacobian already at hand (e.g. a Levenberg-Marquardt solver's last one).

    Args:
        jacobian: [N, P] d residuals / d scaled parameters.
        residuals: [N] (flattened if not), the residual vector at the solution.
        labels: [P] names of the scaled coordinates.
        values: [P] physical values at the solution.
        dxdz: [P] d physical / d scaled (the transforms' slopes).
        rtol: as in `gauss_newton_report`: eigenvalues of J^T J at or below rtol * max are flagged.
        sigma2: as in `gauss_newton_report`: the known residual variance, or None to estimate it.

    Returns:
        IdentifiabilityReport (every number NaN when J^T J is not finite); ValueError when the shapes disagree.
    """
    jac = np.asarray(jacobian, np.float64)
    r = np.ravel(np.asarray(residuals, np.float64))
    labels = tuple(labels)
    num_params = jac.shape[1]
    if len(labels) != num_params or r.size != jac.shape[0]:
        raise ValueError(f"jacobian {jac.shape} does not match {len(labels)} labels and {r.size} residuals")
    jtj = jac.T @ jac
    if not np.all(np.isfinite(jtj)):
        # A non-finite Jacobian (a simulation that blew up at the estimate) says nothing about what is
        # identifiable: every number of the report is NaN (eigh's iteration would not converge on it).
        nan = np.full(num_params, np.nan)
        return IdentifiabilityReport(labels=labels, values=np.asarray(values, np.float64), residuals=r,
                                     jacobian=jac, jtj=jtj, eigenvalues=nan, eigenvectors=np.eye(num_params),
                                     condition_number=float("nan"), unidentifiable=(), sigma2=float("nan"),
                                     stderr=nan, stderr_physical=nan)
    eigenvalues, eigenvectors = np.linalg.eigh(jtj)
    lam_max = eigenvalues[-1]
    condition = float(lam_max / eigenvalues[0]) if eigenvalues[0] > 0 else float("inf")
    flagged = eigenvalues <= rtol * lam_max
    combos = tuple(_combination(eigenvectors[:, k], labels) for k in np.flatnonzero(flagged))

    if sigma2 is None:
        dof = r.size - num_params
        sigma2 = float(r @ r / dof) if dof > 0 else float("nan")
    # Covariance on the identifiable subspace; parameters in a flagged direction have unbounded variance.
    keep = ~flagged
    variance = sigma2 * (eigenvectors[:, keep] ** 2) @ (1.0 / eigenvalues[keep])
    in_flagged = np.any(np.abs(eigenvectors[:, flagged]) >= COMBINATION_MIN_WEIGHT, axis=1)
    stderr = np.where(in_flagged, np.inf, np.sqrt(variance))
    return IdentifiabilityReport(
        labels=labels,
        values=np.asarray(values, np.float64),
        residuals=r,
        jacobian=jac,
        jtj=jtj,
        eigenvalues=eigenvalues,
        eigenvectors=eigenvectors,
        condition_number=condition,
        unidentifiable=combos,
        sigma2=sigma2,
        stderr=stderr,
        stderr_physical=_physical_stderr(stderr, dxdz),
    )
