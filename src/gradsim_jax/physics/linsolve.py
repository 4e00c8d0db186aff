"""A differentiable, matrix-free linear solve for the implicit integrator: conjugate gradients with a fixed
number of iterations.

`cg_solve(matvec, b, iterations)` returns x with matvec(x) ~ b for a positive definite operator given only as a
function (for the implicit step: a Jacobian-vector product of the forces, never a matrix). The
iteration count is fixed (static) so that the program's shape does not depend on the data: a batch (`vmap`)
runs the same iterations for every member, and the solve compiles once. Breakdowns are guarded: once the
residual is exactly zero (a system at rest, a right-hand side of 0) the remaining iterations change nothing,
instead of dividing 0 by 0.

Conjugate gradients assume a symmetric operator. The implicit step's is symmetric up to the derivative of its
damping forces by position (a spring's damping acts along its direction, which turns with the particles), small
beside the mass and stiffness terms; CG still converges on it.

Derivatives: the solve is wrapped in `jax.lax.custom_linear_solve`, so reverse mode does not store the
iterations; it solves the transposed system (by the same CG on the transposed operator, which JAX derives from
`matvec`: exact also where the operator is not symmetric) with the same iterations,
and the derivative of the operator's own parameters (stiffness inside `matvec`) comes from differentiating
`matvec`. The derivative is that of the exact solve, A^-1, evaluated with the fixed iterations: it agrees with
finite differences of the truncated forward solve to the truncation's residual (tests/physics/
test_physics_implicit.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _vdot(a, b):
    return sum(jnp.vdot(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def _axpy(alpha, x, y):
    return jax.tree_util.tree_map(lambda xi, yi: alpha * xi + yi, x, y)


def _conjugate_gradients(matvec, b, iterations: int, tolerance: float = 0.0):
    """Unpreconditioned CG from zeros for `iterations` steps, or (tolerance > 0) until the residual is at most
    `tolerance` times |b|; a step with no residual left changes nothing."""
    x = jax.tree_util.tree_map(jnp.zeros_like, b)
    r = b
    rr = _vdot(r, r)

    def body(carry):
        x, r, d, rr = carry
        ad = matvec(d)
        dad = _vdot(d, ad)
        go = (rr > 0.0) & (dad > 0.0)
        alpha = jnp.where(go, rr / jnp.where(go, dad, 1.0), 0.0)
        x = _axpy(alpha, d, x)
        r = _axpy(-alpha, ad, r)
        rr_new = _vdot(r, r)
        beta = jnp.where(go, rr_new / jnp.where(go, rr, 1.0), 0.0)
        d = _axpy(beta, d, r)
        return x, r, d, jnp.where(go, rr_new, 0.0)

    if not tolerance:
        return jax.lax.fori_loop(0, iterations, lambda _, carry: body(carry), (x, r, r, rr))[0]
    stop = (tolerance * tolerance) * rr

    def unfinished(state):
        k, (_, _, _, rr_k) = state
        return (k < iterations) & (rr_k > stop)

    return jax.lax.while_loop(unfinished, lambda state: (state[0] + 1, body(state[1])), (0, (x, r, r, rr)))[1][0]


def cg_solve(matvec, b, iterations: int, tolerance: float = 0.0):
    """x with matvec(x) = b by `iterations` conjugate-gradient steps from 0 (module docstring), or fewer: with a
    `tolerance` > 0 the iterations stop once the residual is at most `tolerance` |b| (Blender's cloth stops at
    0.01, at most 100 iterations; a `while_loop`, so a batch runs until its slowest member is done).

    Args:
        matvec: a linear function of a pytree like `b` (the operator: positive definite, symmetric or nearly so;
            it may close over traced values, whose derivatives flow through it).
        b: the right-hand side (a pytree of arrays).
        iterations: static, the number of CG steps (each calls `matvec` once), at most when `tolerance` > 0.
        tolerance: static, the relative residual to stop at (0: run every iteration).

    Returns:
        x, like `b`.
    """
    def solve(op, rhs):
        return _conjugate_gradients(op, rhs, iterations, tolerance)

    return jax.lax.custom_linear_solve(matvec, b, solve, transpose_solve=solve)
