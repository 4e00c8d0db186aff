"""The operators of the smoke's staggered grid (`physics.smoke`'s conventions: u on the cells' left faces, v on
their bottom faces, scalars at the cell centres, spacing h m): face fields extended by the walls
(`extended_faces`), the walls applied (`with_walls`), divergence, gradient, Laplacian, and the pressure solve
that makes a velocity divergence-free (`pressure`: conjugate gradients or FFT; `project`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
    from gradsim_jax.physics.smoke import SmokeTopology


def extended_faces(field, axis: int, closed: bool):
    """A face field with its far wall appended (zeros, closed) or its first face repeated (periodic).

    Args:
        field: [ny, nx] a face field (u or v, m/s).
        axis: the axis the faces run along (1: u, 0: v).
        closed: True for closed walls (zeros appended), False for periodic ones.

    Returns:
        [ny, nx + 1] or [ny + 1, nx], the field with its far faces.
    """
    edge = jnp.take(field, jnp.array([0]), axis=axis)
    return jnp.concatenate([field, jnp.zeros_like(edge) if closed else edge], axis=axis)


def with_walls(topology, u, v):
    """No flow through closed walls (the first column of u, the first row of v).

    Args:
        topology: the grid (`SmokeTopology`): walls, spacing h m.
        u: [ny, nx] m/s, the x velocity on the cells' left faces.
        v: [ny, nx] m/s, the y velocity on the cells' bottom faces.

    Returns:
        (u, v), the face velocities with no flow through closed walls.
    """
    if topology.walls != "closed":
        return u, v
    return u.at[:, 0].set(0.0), v.at[0, :].set(0.0)


def divergence(topology: SmokeTopology, u, v):
    """div [ny, nx] 1/s of the face velocities, per cell.

    Args:
        topology: the grid (`SmokeTopology`): walls, spacing h m.
        u: [ny, nx] m/s, the x velocity on the cells' left faces.
        v: [ny, nx] m/s, the y velocity on the cells' bottom faces.

    Returns:
        [ny, nx] 1/s, the velocity's divergence at the cell centres.
    """
    closed = topology.walls == "closed"
    ue, ve = extended_faces(u, 1, closed), extended_faces(v, 0, closed)
    return (ue[:, 1:] - ue[:, :-1] + ve[1:, :] - ve[:-1, :]) / topology.spacing


def gradient(topology: SmokeTopology, phi):
    """(d phi / dx on the left faces, d phi / dy on the bottom faces); zero on closed walls.

    Args:
        topology: the grid (`SmokeTopology`): walls, spacing h m.
        phi: [ny, nx], a field at the cell centres (`pressure`: m^2/s).

    Returns:
        (gx, gy) [ny, nx] each on the u and v faces, phi's unit per m.
    """
    h = topology.spacing
    gx = (phi - jnp.roll(phi, 1, axis=1)) / h
    gy = (phi - jnp.roll(phi, 1, axis=0)) / h
    return with_walls(topology, gx, gy)


def laplacian(topology: SmokeTopology, phi):
    """L phi = div grad phi [ny, nx]: the MAC grid's Laplacian, no flux through closed walls.

    Args:
        topology: the grid (`SmokeTopology`): walls, spacing h m.
        phi: [ny, nx], a field at the cell centres; L phi is in its unit per m^2.

    Returns:
        [ny, nx], L phi.
    """
    return divergence(topology, *gradient(topology, phi))


def _cg(matvec, b, tolerance: float, max_iterations: int, deflate=lambda a: a):
    """Conjugate gradients on the symmetric positive semi-definite `matvec` from 0 until |r| <= tolerance |b|.
    `deflate` removes the operator's null space from the residual and the search direction at each iteration:
    rounding leaves a little of it in them, and a direction p with p.Ap ~ 0 would take a huge step along it
    (a float32 solve asked for more than float32 can give then blows up instead of stalling)."""
    dot = lambda a, c: jnp.sum(a * c)  # noqa: E731
    bb = dot(b, b)
    stop = (tolerance ** 2) * bb

    def cond(carry):
        k, _, _, _, rr = carry
        return (k < max_iterations) & (rr > stop)

    def body(carry):
        k, x, r, p, rr = carry
        ap = matvec(p)
        alpha = rr / jnp.where(dot(p, ap) > 0, dot(p, ap), 1.0)
        x, r = x + alpha * p, deflate(r - alpha * ap)
        rr_new = dot(r, r)
        p = deflate(r + (rr_new / jnp.where(rr > 0, rr, 1.0)) * p)
        return k + 1, x, r, p, rr_new

    x0 = jnp.zeros_like(b)
    _, x, _, _, _ = jax.lax.while_loop(cond, body, (0, x0, b, b, bb))
    return x


def _fft_solve(topology: SmokeTopology, rhs):
    """phi with L phi = rhs on the periodic grid (rhs of zero mean; phi of zero mean), exactly by FFT."""
    ny, nx = topology.shape
    ky = jnp.fft.fftfreq(ny)[:, None]
    kx = jnp.fft.fftfreq(nx)[None, :]
    symbol = -(4.0 * jnp.sin(jnp.pi * kx) ** 2 + 4.0 * jnp.sin(jnp.pi * ky) ** 2) / topology.spacing ** 2
    symbol = symbol.at[0, 0].set(1.0)
    phi_hat = jnp.fft.fft2(rhs) / symbol
    return jnp.real(jnp.fft.ifft2(phi_hat.at[0, 0].set(0.0))).astype(rhs.dtype)


def pressure(topology: SmokeTopology, div):
    """phi [ny, nx] m^2/s with L phi = div (zero mean), by `topology.solver`; its adjoint is a solve as well.
    Args:
        topology: the grid (`SmokeTopology`): solver, tolerance, max_iterations, walls, spacing h m.
        div: [ny, nx] 1/s, the right-hand side (`divergence`); its mean is taken off first."""
    div = div - jnp.mean(div)  # the part L can reach (closed and periodic: L's range has zero mean)
    if topology.solver == "fft":
        return _fft_solve(topology, div)

    def matvec(phi):  # -L: symmetric positive semi-definite
        return -laplacian(topology, phi)

    def solve(op, b):
        x = _cg(op, b, topology.tolerance, topology.max_iterations, deflate=lambda a: a - jnp.mean(a))
        return x - jnp.mean(x)

    return jax.lax.custom_linear_solve(matvec, -div, solve, symmetric=True)


def project(topology: SmokeTopology, u, v):
    """(u, v) made divergence-free (to the solver's tolerance): minus the gradient of the pressure.

    Args:
        topology: the grid (`SmokeTopology`): walls, solver, tolerance, spacing h m.
        u: [ny, nx] m/s, the x velocity on the cells' left faces.
        v: [ny, nx] m/s, the y velocity on the cells' bottom faces.

    Returns:
        (u, v) [ny, nx] each, m/s: the divergence-free part of the velocity.
    """
    phi = pressure(topology, divergence(topology, u, v))
    gx, gy = gradient(topology, phi)
    return with_walls(topology, u - gx, v - gy)
