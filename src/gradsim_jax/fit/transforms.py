"""Maps between physical parameter values and the unconstrained space an optimizer works in.

Convention: `forward(x)` takes a physical value to the unconstrained space, `inverse(u)` brings it back,
so `inverse(forward(x)) == x` up to rounding. The optimizer only ever sees `u`; every `inverse` maps all
of R onto the valid physical range, so no optimizer step can produce a negative mass or a stiffness
outside its bounds. All transforms act elementwise and keep the dtype of their input.

- `Identity`: unbounded quantities (positions, gravity, velocities).
- `Log`: positive quantities spanning orders of magnitude (mass, stiffness). A step in `u` is a relative
  change of `x`, which is why gradSim-style fits converge for parameters of very different scales.
- `Softplus`: positive quantities that may approach 0 (damping): near 0 it behaves like `exp`, far from
  0 like the identity, so large values take additive rather than multiplicative steps.
- `Bounded(lo, hi)`: a scaled sigmoid, for quantities with physical bounds (friction coefficient in
  [0, 1], Poisson ratio below 0.5).

`resolve_transform` turns the strings "identity", "log" and "softplus" into these objects.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Union

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.typing import get_path, named_leaves, replace_paths

Array = Any


class Transform:
    """Base of the elementwise bijections between physical values `x` and unconstrained values `u`."""

    #: short name used in labels such as "log(mass)"; identity has none.
    name: str = ""

    def forward(self, x: Array) -> Array:
        """Physical `x` (any shape) -> unconstrained `u` (same shape and dtype).

        Args:
            x: physical values, any shape, in the field's unit.

        Returns:
            `u`, the same shape and dtype as `x`.
        """
        raise NotImplementedError

    def inverse(self, u: Array) -> Array:
        """Unconstrained `u` (any shape) -> physical `x` (same shape and dtype).

        Args:
            u: unconstrained values, any shape.

        Returns:
            `x`, the same shape and dtype as `u`, in the field's unit.
        """
        raise NotImplementedError

    def check_domain(self, field: str, x: Array) -> None:
        """Raise ValueError, naming `field`, when host value `x` is outside this transform's domain.

        The base accepts any finite value.

        Args:
            field: the field's name (dotted path), for the message.
            x: the field's physical value, any shape (numpy or host array).
        """
        x = np.asarray(x)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"field {field!r} has non-finite values: {x.ravel()[:8]}")

    def label(self, field: str) -> str:
        """Readable name of the unconstrained coordinate of `field`, e.g. "log(mass)".

        Args:
            field: the field's name (dotted path).

        Returns:
            str, "name(field)", or `field` itself for a transform without a name.
        """
        return f"{self.name}({field})" if self.name else field


def _check_open_interval(transform: str, field: str, x: Array, lo: float, hi: float) -> None:
    x = np.asarray(x)
    bad = ~((x > lo) & (x < hi))
    if np.any(bad):
        raise ValueError(
            f"field {field!r} must lie in the open interval ({lo}, {hi}) for the {transform!r} "
            f"transform; got {np.count_nonzero(bad)} value(s) outside, e.g. {x[bad].ravel()[:4]}"
        )


@dataclasses.dataclass(frozen=True)
class Identity(Transform):
    """x = u."""

    def forward(self, x: Array) -> Array:
        """Physical `x` -> unconstrained `u`: u = x.

        Args:
            x: physical values, any shape, in the field's unit.

        Returns:
            `u`, the same shape (and dtype) as `x`.
        """
        return jnp.asarray(x)

    def inverse(self, u: Array) -> Array:
        """Unconstrained `u` -> physical `x`: x = u.

        Args:
            u: unconstrained values, any shape.

        Returns:
            `x`, the same shape (and dtype) as `u`, in the field's unit.
        """
        return jnp.asarray(u)


@dataclasses.dataclass(frozen=True)
class Log(Transform):
    """x = exp(u), x > 0."""

    name = "log"

    def forward(self, x: Array) -> Array:
        """Physical `x` -> unconstrained `u`: u = log(x).

        Args:
            x: physical values, any shape, in the field's unit (> 0).

        Returns:
            `u`, the same shape (and dtype) as `x`.
        """
        return jnp.log(x)

    def inverse(self, u: Array) -> Array:
        """Unconstrained `u` -> physical `x`: x = exp(u) > 0.

        Args:
            u: unconstrained values, any shape.

        Returns:
            `x`, the same shape (and dtype) as `u`, in the field's unit.
        """
        return jnp.exp(u)

    def check_domain(self, field: str, x: Array) -> None:
        """Raise ValueError, naming `field`, when host value `x` is not in (0, inf).

        Args:
            field: the field's name (dotted path), for the message.
            x: the field's physical value, any shape (numpy or host array).
        """
        _check_open_interval("log", field, x, 0.0, np.inf)


@dataclasses.dataclass(frozen=True)
class Softplus(Transform):
    """x = softplus(u) = log(1 + exp(u)), x > 0."""

    name = "softplus_inv"

    def forward(self, x: Array) -> Array:
        """Physical `x` -> unconstrained `u`: u = log(expm1(x)), the inverse of softplus.

        Args:
            x: physical values, any shape, in the field's unit (> 0).

        Returns:
            `u`, the same shape (and dtype) as `x`.
        """
        x = jnp.asarray(x)
        # Above -log(eps), softplus(u) == u to working precision; there exp(-x) may also underflow and
        # turn log(-expm1(-x)) into -inf, so take the identity branch (double-where keeps grads finite).
        big = x > -jnp.log(jnp.finfo(x.dtype).eps)
        safe_x = jnp.where(big, jnp.ones_like(x), x)
        return jnp.where(big, x, safe_x + jnp.log(-jnp.expm1(-safe_x)))

    def inverse(self, u: Array) -> Array:
        """Unconstrained `u` -> physical `x`: x = softplus(u) > 0.

        Args:
            u: unconstrained values, any shape.

        Returns:
            `x`, the same shape (and dtype) as `u`, in the field's unit.
        """
        return jax.nn.softplus(u)

    def check_domain(self, field: str, x: Array) -> None:
        """Raise ValueError, naming `field`, when host value `x` is not in (0, inf).

        Args:
            field: the field's name (dotted path), for the message.
            x: the field's physical value, any shape (numpy or host array).
        """
        _check_open_interval("softplus", field, x, 0.0, np.inf)


@dataclasses.dataclass(frozen=True)
class Bounded(Transform):
    """x = lo + (hi - lo) * sigmoid(u), lo < x < hi."""

    lo: float
    hi: float
    name = "logit"

    def __post_init__(self):
        if not (np.isfinite(self.lo) and np.isfinite(self.hi) and self.lo < self.hi):
            raise ValueError(f"Bounded needs finite lo < hi; got lo={self.lo}, hi={self.hi}")

    def forward(self, x: Array) -> Array:
        """Physical `x` -> unconstrained `u`: u = logit((x - lo) / (hi - lo)).

        Args:
            x: physical values, any shape, in the field's unit (in (lo, hi)).

        Returns:
            `u`, the same shape (and dtype) as `x`.
        """
        t = (jnp.asarray(x) - self.lo) / (self.hi - self.lo)
        return jnp.log(t) - jnp.log1p(-t)

    def inverse(self, u: Array) -> Array:
        """Unconstrained `u` -> physical `x`: x = lo + (hi - lo) sigmoid(u), in (lo, hi).

        Args:
            u: unconstrained values, any shape.

        Returns:
            `x`, the same shape (and dtype) as `u`, in the field's unit.
        """
        return self.lo + (self.hi - self.lo) * jax.nn.sigmoid(u)

    def check_domain(self, field: str, x: Array) -> None:
        """Raise ValueError, naming `field`, when host value `x` is not in the open interval (lo, hi).

        Args:
            field: the field's name (dotted path), for the message.
            x: the field's physical value, any shape (numpy or host array).
        """
        _check_open_interval(f"Bounded({self.lo}, {self.hi})", field, x, self.lo, self.hi)


TransformSpec = Union[str, Transform]

_BY_NAME = {"identity": Identity(), "log": Log(), "softplus": Softplus()}


def resolve_transform(spec: TransformSpec | None) -> Transform:
    """Turn "identity" | "log" | "softplus" | a `Transform` | None (identity) into a `Transform`.

    Args:
        spec: "identity", "log", "softplus", a `Transform` (returned as it is), or None (identity).

    Returns:
        The `Transform`; ValueError for an unknown name.
    """
    if spec is None:
        return _BY_NAME["identity"]
    if isinstance(spec, Transform):
        return spec
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    raise ValueError(
        f"unknown transform {spec!r}; use one of {sorted(_BY_NAME)} or a Transform such as Bounded(lo, hi)"
    )


# --- Free fields of a parameter pytree ----------------------------------------------------------------
# A parameter tree is a registered dataclass (like `physics.types.Params`, whose branches are dataclasses
# too) or a dict; its fields are named by strings, nested ones by dotted paths ("cloth.tri_ke"). The
# optimizer state holds only the free fields, as a dict {name: unconstrained array}.


def field_names(params: Any) -> tuple[str, ...]:
    """Names of the leaves of `params`: a dataclass instance (nested leaves by dotted path) or a mapping with
    string keys.

    Args:
        params: the parameter tree: a dataclass instance or a dict of arrays (TypeError otherwise).

    Returns:
        tuple of str, the field names (dotted paths for nested dataclass leaves), in tree order.
    """
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        return tuple(name for name, _ in named_leaves(params, ""))
    if isinstance(params, dict):
        return tuple(params)
    raise TypeError(f"parameters must be a dataclass instance or a dict of arrays; got {type(params).__name__}")


def get_field(params: Any, name: str) -> Array:
    """The value of field `name` (a dotted path in a dataclass tree) of `params`.

    Args:
        params: the parameter tree: a dataclass instance or a dict of arrays.
        name: the field's key (dict) or dotted path (dataclass tree), e.g. "cloth.tri_ke".

    Returns:
        The field's value (an array, in the field's physical unit).
    """
    return params[name] if isinstance(params, dict) else get_path(params, name)


def replace_fields(params: Any, values: dict[str, Array]) -> Any:
    """A copy of `params` with the fields in `values` (dotted paths in a dataclass tree) replaced.

    Args:
        params: the parameter tree: a dataclass instance or a dict of arrays (not modified).
        values: {field name or dotted path: new value}.

    Returns:
        The new tree, of the type of `params`.
    """
    if isinstance(params, dict):
        return {**params, **values}
    return replace_paths(params, values)


def resolve_free(
    params: Any, free: tuple[str, ...] | list[str] | None, transforms: dict[str, TransformSpec] | None
) -> dict[str, Transform]:
    """Validate the choice of free fields and their transforms, on the host, before any compilation.

    Args:
      params: the parameter tree (physical values).
      free: names of the fields to optimize; None means every floating-point field.
      transforms: {name: "identity" | "log" | "softplus" | Transform}; free fields not named get identity.
    Returns:
      {name: Transform} for the free fields, in the order given (that order is the order of the flattened
      parameter vector in `identifiability` and of the checkpoint entries).
    Raises:
      ValueError: unknown field, non-float free field, or an initial value outside its transform's domain.
    """
    names = field_names(params)
    transforms = dict(transforms or {})
    if free is None:
        free = tuple(n for n in names if jnp.issubdtype(jnp.result_type(get_field(params, n)), jnp.floating))
    elif isinstance(free, str):
        free = (free,)
    free = tuple(free)
    unknown = [n for n in (*free, *transforms) if n not in names]
    if unknown:
        raise ValueError(f"unknown parameter field(s) {unknown}; the parameters have fields {list(names)}")
    if len(set(free)) != len(free) or not free:
        raise ValueError(f"free must name each field at most once and at least one field; got {free}")
    resolved = {}
    for n in free:
        value = get_field(params, n)
        if not jnp.issubdtype(jnp.result_type(value), jnp.floating):
            raise ValueError(f"free field {n!r} must be floating point; got dtype {jnp.result_type(value)}")
        t = resolve_transform(transforms.get(n))
        t.check_domain(n, value)
        resolved[n] = t
    return resolved


def to_unconstrained(params: Any, transforms: dict[str, Transform]) -> dict[str, Array]:
    """{name: forward(value)} for the free fields named by `transforms`, each in its field's dtype.

    Args:
        params: the parameter tree (physical values).
        transforms: {name: Transform} of the free fields (`resolve_free`).

    Returns:
        {name: unconstrained array}, each of its field's shape and dtype.
    """
    out = {}
    for n, t in transforms.items():
        x = jnp.asarray(get_field(params, n))
        # A strong (not weak) dtype, so the optimizer's output has the same type and jit does not retrace.
        out[n] = jnp.asarray(t.forward(x), dtype=x.dtype)
    return out


def to_physical(params: Any, u: dict[str, Array], transforms: dict[str, Transform]) -> Any:
    """`params` with each free field replaced by `inverse(u[name])`; the other fields pass through.

    Args:
        params: the parameter tree whose other fields are kept.
        u: {name: unconstrained array} of the free fields.
        transforms: {name: Transform} of the free fields (`resolve_free`).

    Returns:
        The parameter tree with physical values in the free fields.
    """
    return replace_fields(params, {n: t.inverse(u[n]) for n, t in transforms.items()})
