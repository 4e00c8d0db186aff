"""Checks of traced values (inside `jit`, `grad`, `vmap`) through `jax.experimental.checkify`.

`validate_scene` inspects concrete inputs on the host; inside a compiled function the values are tracers,
and a bad one passes silently (a NaN or negative mass makes its particle kinematic, a NaN stiffness turns
the gradient into NaN). The checks here report the first bad value with its field, index and value, in
the words `validate_scene` uses, e.g. "Params.mass[17] = nan is not finite".

- `scene_checks(topology, params, state)`: adds the checks to the enclosing `checkify.checkify`d function.
- `validate_traced(topology, params, state) -> checkify.Error`: the same checks as a value, callable in
  any traced function (no checkify around it): return it from the jitted function (as `has_aux` output
  under `grad`) and call `raise_if_error` on the host.
- `trajectory_checks(trajectory)`: the first non-finite frame of a rollout (`first_nonfinite`, traced).
- `checked_simulate(...) -> (Error, State)`: `simulate` with both; jit it like `simulate`.

Only the first failing check is reported (checkify keeps the first error). Checks cost a few reductions
over the inputs, nothing per time step.
"""

from __future__ import annotations

import contextlib
import itertools

import jax.numpy as jnp
from jax.experimental import checkify

from gradsim_jax.physics.rollout import simulate
from gradsim_jax.physics.types import State
from gradsim_jax.typing import get_path, named_leaves
from gradsim_jax.physics.validate import INDEX_WIDTHS, NONNEGATIVE, finite_view, params_leaves, validate_shapes


_CODE_BASE = 1 << 30
_numbering = False


@contextlib.contextmanager
def deterministic_check_codes():
    """Number the checkify checks traced inside from a fixed base, so that the same program traced twice
    is the same program.

    checkify gives every check a code from one process-wide counter, and the codes are constants of the
    compiled program: a fit traced a second time in one process (a resumed fit, the next test, the
    next CLI command in a session) differed only in them and missed JAX's persistent compilation cache,
    recompiling for tens of seconds. Wrap the *whole* traced function (e.g. a fit's step), so that codes
    stay unique within it; nested uses keep the outer numbering. The base (2**30) is far above the
    process-wide counter, so checks traced outside cannot collide. Relies on `jax._src.checkify.next_code`;
    where a JAX version lacks it, this does nothing (correct, only uncached)."""
    global _numbering
    from jax._src import checkify as impl

    if _numbering or not callable(getattr(impl, "next_code", None)):
        yield
        return
    saved, _numbering = impl.next_code, True
    impl.next_code = itertools.count(_CODE_BASE).__next__
    try:
        yield
    finally:
        impl.next_code, _numbering = saved, False


class TracedCheckError(ValueError):
    """A check of traced values failed; the message names the field, the index and the value."""


def _first(bad):
    """Index tuple of the first True entry of `bad` (all zeros when none) and the flat index."""
    flat = jnp.argmax(bad.reshape(-1)) if bad.ndim else jnp.zeros((), jnp.int32)
    return (tuple(jnp.unravel_index(flat, bad.shape)) if bad.ndim else ()), flat


def _index_format(ndim: int) -> str:
    return "[" + ", ".join(["{}"] * ndim) + "]" if ndim else ""


def check_values(name: str, value, nonnegative: bool = False, unit: bool = False) -> None:
    """A checkify check that `value` is finite (and >= 0): "NAME[i, j] = nan is not finite" (or, with
    `nonnegative`, "NAME[i] = -0.1 is not a finite value >= 0"; with `unit`, "... is not in [0, 1]", for
    colours). One check per array: each adds a handful of operations to the compiled program.

    Args:
        name: the field's name in the message ("Params.cloth.tri_ke").
        value: the array to check (any shape; an empty one is not checked).
        nonnegative: also require value >= 0.
        unit: also require value in [0, 1] (a second check).
    """
    value = jnp.asarray(value)
    if value.size == 0:
        return
    bad = ~jnp.isfinite(value)
    if nonnegative:
        bad = bad | (value < 0)
    at, flat = _first(bad)
    shown = value.reshape(-1)[flat] if value.ndim else value
    what = "is not a finite value >= 0" if nonnegative else "is not finite"
    checkify.check(~jnp.any(bad), f"{name}{_index_format(value.ndim)} = {{:.6g}} {what}", *at, shown)
    if unit:  # a second check, so that a NaN is still reported as not finite
        outside = (value < 0) | (value > 1)
        at, flat = _first(outside)
        shown = value.reshape(-1)[flat] if value.ndim else value
        checkify.check(~jnp.any(outside), f"{name}{_index_format(value.ndim)} = {{:.6g}} is not in [0, 1]", *at,
                       shown)


def check_indices(name: str, idx, count, distinct: bool = True) -> None:
    """checkify checks that every row of `idx` [k, w] lies in [0, count) (and repeats no entry):
    "NAME[k] = [a, b, c] has an index out of range [0, count)".

    Args:
        name: the field's name in the message ("Topology.cloth.triangles").
        idx: [k, w] int, index rows (an empty one is not checked).
        count: the exclusive upper bound of the indices (the particle count).
        distinct: also require that no row repeats an index (a degenerate element).
    """
    idx = jnp.asarray(idx)
    if idx.shape[0] == 0:
        return
    width = idx.shape[1]
    row_fmt = "[" + ", ".join(["{}"] * width) + "]"
    bad = jnp.any((idx < 0) | (idx >= count), axis=1)
    k = jnp.argmax(bad)
    checkify.check(~jnp.any(bad), f"{name}[{{}}] = {row_fmt} has an index out of range [0, {count})",
                   k, *(idx[k, j] for j in range(width)))
    if distinct:
        same = jnp.zeros(idx.shape[0], bool)
        for a in range(width):
            for b in range(a + 1, width):
                same = same | (idx[:, a] == idx[:, b])
        k = jnp.argmax(same)
        checkify.check(~jnp.any(same), f"{name}[{{}}] = {row_fmt} repeats a particle (degenerate)",
                       k, *(idx[k, j] for j in range(width)))


def scene_checks(topology, params, state=None) -> None:
    """Add checkify checks of the scene's values: indices in range and distinct (rigid bodies' too), every
    Params field finite
    (and >= 0 where `validate_scene` asks it), ground normal nonzero, state finite. Shapes are static and
    are checked at once (ValueError). Call inside a `checkify.checkify`d function.

    Args:
        topology: the scene's Topology.
        params: the scene's Params.
        state: the scene's State to check as well, or None.
    """
    per = validate_shapes(topology, params, state)
    for name in INDEX_WIDTHS:
        check_indices(f"Topology.{name}", get_path(topology, name), per["n"])
    hull = topology.rigid.vertex_body.shape[0]
    check_indices("Topology.rigid.faces", topology.rigid.faces, hull)
    bodies = params.rigid.mass.shape[0]
    for name in ("vertex_body", "push_body"):
        check_indices(f"Topology.rigid.{name}", getattr(topology.rigid, name)[:, None], bodies, distinct=False)
    for name, value in params_leaves(params).items():
        check_values(f"Params.{name}", finite_view(name, jnp.asarray(value)), name in NONNEGATIVE)
    checkify.check(jnp.any(jnp.asarray(params.world.ground_normal) != 0),
                   "Params.world.ground_normal is the zero vector")
    if state is not None:
        for name, value in named_leaves(state, "State"):
            check_values(name, value)


def validate_traced(topology, params, state=None) -> checkify.Error:
    """`scene_checks` as a value: a `checkify.Error` (`.get()` is None when all is well). Traceable; use it
    in any jitted or differentiated function and check it on the host with `raise_if_error`.

    Args:
        topology: the scene's Topology.
        params: the scene's Params.
        state: the scene's State to check as well, or None.

    Returns:
        The checkify.Error of the first failed check (or none).
    """
    err, _ = checkify.checkify(scene_checks, errors=checkify.user_checks)(topology, params, state)
    return err


def trajectory_checks(trajectory: State) -> None:
    """Add a checkify check that every state of `trajectory` (leading axis = frames) is finite, naming the
    first non-finite frame, quantity and particle like `SimulationDiverged`.

    Args:
        trajectory: a State whose leaves have a leading frame axis (particles.x and v [T, n, 3]).
    """
    bad = {q: ~jnp.all(jnp.isfinite(getattr(trajectory.particles, q)), axis=-1) for q in ("x", "v")}  # [T, n]
    bad_frame = jnp.any(bad["x"], axis=-1) | jnp.any(bad["v"], axis=-1)
    frame = jnp.argmax(bad_frame)
    x_bad = jnp.any(bad["x"][frame])
    quantity_x = "simulation diverged: State.x of particle {} is not finite at frame {}"
    quantity_v = "simulation diverged: State.v of particle {} is not finite at frame {}"
    checkify.check(~(jnp.any(bad_frame) & x_bad), quantity_x, jnp.argmax(bad["x"][frame]), frame)
    checkify.check(~jnp.any(bad_frame), quantity_v, jnp.argmax(bad["v"][frame]), frame)


def _scene_and_trajectory_checks(topology, params, state0, trajectory):
    scene_checks(topology, params, state0)
    trajectory_checks(trajectory)


def checked_simulate(topology, params, state0, **kwargs) -> tuple[checkify.Error, State]:
    """`simulate(topology, params, state0, **kwargs)` with `scene_checks` on its inputs and
    `trajectory_checks` on its output: returns (checkify.Error, trajectory). Traceable (jit, grad with
    `has_aux`, vmap); the static arguments are those of `simulate`. The rollout itself runs outside the
    checkify transformation, so it compiles as `simulate` does.

    Args:
        topology: the scene's Topology.
        params: the scene's Params.
        state0: the initial State.
        **kwargs: the other arguments of `simulate` (frames, substeps, dt, integrator, ...).

    Returns:
        (checkify.Error, the trajectory State with a leading frame axis).
    """
    trajectory = simulate(topology, params, state0, **kwargs)
    err, _ = checkify.checkify(_scene_and_trajectory_checks, errors=checkify.user_checks)(
        topology, params, state0, trajectory)
    return err, trajectory


def error_message(err: checkify.Error) -> str | None:
    """The first failed check's message without checkify's suffix, or None when every check passed.

    Args:
        err: a checkify.Error (from `validate_traced` or `checked_simulate`), concrete.

    Returns:
        The message, or None.
    """
    message = err.get()
    if message is None:
        return None
    return message.replace(" (`check` failed)", "")


def raise_if_error(err: checkify.Error, context: str = "") -> None:
    """Host side: raise `TracedCheckError` ("CONTEXT: message") if a check failed; else do nothing.

    Args:
        err: a checkify.Error, concrete.
        context: words put before the message ("" for none).
    """
    message = error_message(err)
    if message is not None:
        raise TracedCheckError(f"{context}: {message}" if context else message)
