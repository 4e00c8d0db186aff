"""Force terms against their energies, their analytic derivatives and special cases."""


import numpy as np
import jax
import jax.numpy as jnp

import gradsim_jax as gs
from gradsim_jax.mathutil import safe_acos, safe_div, safe_norm, safe_normalize
from gradsim_jax.physics import (
    bending_forces, ground_contact, membrane_energy, membrane_forces, spring_energy, spring_forces,
)
from gradsim_jax.physics.cloth import bending_force, dihedral_angle, rest_shapes, triangle_force
from gradsim_jax.physics import replace_paths


def _perturbed_cloth(rng, **kw):
    scene = gs.cloth_grid(3, 2, 0.1, 0.1, mass=0.1, tri_ke=300.0, tri_ka=150.0, tri_kd=0.0, **kw)
    scene = scene.add_springs([[0, 11], [3, 8]], [40.0, 70.0], 0.0)
    top, par, st = scene.build()
    x = st.particles.x + 0.02 * rng.standard_normal(st.particles.x.shape)
    return top, par, x


def test_spring_and_membrane_forces_are_minus_energy_gradients(x64):
    rng = np.random.default_rng(1)
    top, par, x = _perturbed_cloth(rng)
    par = replace_paths(par, {"cloth.tri_activation": jnp.asarray(rng.uniform(-0.1, 0.1, par.cloth.tri_ke.shape))})
    v = jnp.zeros_like(x)

    @jax.jit
    def both(par, x):
        return (spring_forces(top, par, x, v), -jax.grad(spring_energy, 2)(top, par, x),
                membrane_forces(top, par, x, v), -jax.grad(membrane_energy, 2)(top, par, x))

    f_spring, e_spring, f_membrane, e_membrane = both(par, x)
    np.testing.assert_allclose(f_spring, e_spring, atol=1e-10)
    np.testing.assert_allclose(f_membrane, e_membrane, rtol=1e-9, atol=1e-9)


def test_bending_directions_are_the_gradient_of_the_dihedral_angle(x64):
    pts = jnp.asarray(np.random.default_rng(2).standard_normal((5, 4, 3)))

    @jax.vmap
    def directions(p):
        # With ke = 1, kd = 0, rest = theta - 1: f_k = -|e| d_k, so d_k = -f_k / |e|.
        f = jnp.stack(bending_force(*p, *jnp.zeros((4, 3)), 1.0, 0.0, dihedral_angle(*p) - 1.0))
        return -f / jnp.linalg.norm(p[3] - p[2]), jax.grad(lambda q: dihedral_angle(*q))(p)

    d, grad = jax.jit(directions)(pts)
    np.testing.assert_allclose(d, grad, rtol=1e-6, atol=1e-9)


def test_bending_forces_vanish_at_rest_and_sum_to_zero(x64):
    rng = np.random.default_rng(3)
    top, par, st = gs.cloth_grid(3, 3, 0.1, 0.1, bend_ke=10.0, bend_kd=0.1).build()
    np.testing.assert_allclose(bending_forces(top, par, st.particles.x, st.particles.v), 0.0, atol=1e-12)
    x = st.particles.x + 0.03 * rng.standard_normal(st.particles.x.shape)
    v = rng.standard_normal(st.particles.x.shape)
    f = bending_forces(top, par, x, v)
    assert float(jnp.abs(f).max()) > 1e-3
    np.testing.assert_allclose(f.sum(0), 0.0, atol=1e-10)
    # Zero net torque about the origin as well: internal forces.
    np.testing.assert_allclose(jnp.cross(x, f).sum(0), 0.0, atol=1e-10)


def test_aerodynamic_drag_on_a_plate_moving_along_its_normal(x64):
    top, par, st = gs.cloth_mesh([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], tri_ke=0, tri_ka=1, tri_kd=0,
                                 tri_drag=2.0, tri_lift=3.0, bend_ke=0).build()
    v = jnp.tile(jnp.array([0.0, 0.0, 4.0]), (3, 1))
    f = jax.jit(lambda x, v: membrane_forces(top, par, x, v))(st.particles.x, v)
    area = 0.5
    # Face-on flow: drag = k_drag area |n.v| v, lift angle pi/2 - acos(1) ~ pi/2 along n, times |v|^2.
    drag = 2.0 * area * 4.0 * 4.0
    lift = 3.0 * area * (np.pi / 2) * 16.0
    np.testing.assert_allclose(f[:, 2], -(drag + lift) * np.ones(3), rtol=1e-3)
    np.testing.assert_allclose(f[:, :2], 0.0, atol=1e-9)


def test_contact_force_normal_and_friction_cone(x64):
    top, par, st = gs.particles([[0, -0.01, 0], [0, 0.5, 0], [0, -0.01, 0]], v=[[3, -1, 4], [1, 0, 0], [0, 0, 0]]
                                ).build(ground=True, contact_ke=1e3, contact_kd=10, contact_kf=1e3, contact_mu=0.5,
                                        particle_radius=0.01)
    f = jax.jit(lambda x, v: ground_contact(top, par, x, v))(st.particles.x, st.particles.v)
    fn = -0.02 * 1e3 - 1.0 * 10  # penetration 0.02, approaching at 1 m/s
    np.testing.assert_allclose(f[0, 1], -fn)
    np.testing.assert_allclose(f[0, [0, 2]], -0.5 * abs(fn) * np.array([3, 4]) / 5.0)  # sliding: mu |fn|
    np.testing.assert_allclose(f[1], 0.0)  # out of contact
    np.testing.assert_allclose(f[2], [0.0, 20.0, 0.0])  # at rest: no friction
    g = jax.jit(jax.jacobian(lambda v: ground_contact(top, par, st.particles.x, v)))(st.particles.v)
    assert np.isfinite(np.asarray(g)).all()


def test_safe_math_gradients_are_finite_at_zero(x64):
    zero = jnp.zeros(3)
    for fn in (safe_norm, lambda v: safe_normalize(v).sum()):
        g = jax.grad(fn)(zero)
        assert np.isfinite(np.asarray(g)).all()
    assert np.isfinite(float(jax.grad(lambda b: safe_div(1.0, b))(0.0)))
    for c in (-1.0, 1.0):
        assert np.isfinite(float(jax.grad(safe_acos)(c)))
    np.testing.assert_allclose(safe_norm(jnp.array([3.0, 4.0])), 5.0)
    np.testing.assert_allclose(jax.grad(safe_norm)(jnp.array([3.0, 4.0])), [0.6, 0.8])


def test_degenerate_triangles_and_bends_give_finite_forces_and_gradients(x64):
    top, par, st = gs.cloth_grid(1, 1, 0.1, 0.1, bend_ke=1.0, tri_drag=0.5, tri_lift=0.5).build()
    collapsed = jnp.zeros_like(st.particles.x)  # every vertex at one point

    def total(x):
        return jnp.sum(membrane_forces(top, par, x, st.particles.v) ** 2) + jnp.sum(bending_forces(top, par, x, st.particles.v) ** 2)

    value_and_grad = jax.jit(jax.value_and_grad(total))
    for x in (collapsed, st.particles.x):
        value, grad = value_and_grad(x)
        assert np.isfinite(float(value))
        assert np.isfinite(np.asarray(grad)).all()


def test_membrane_kernel_keeps_float32_accuracy_on_thin_triangles():
    """The kernel forms |e_q x e_r|^2 from the cross product's components: on slivers (heights 1e-3 of
    their bases) its float32 forces match a float64 evaluation of the same float32 inputs to 2e-4 of their
    size (the kernel with cross products: 1.3e-4; both err as eps / sin of the small angle), where the
    Lagrange identity |e_q|^2 |e_r|^2 - (e_q . e_r)^2 loses 7e-2 (its error grows as eps / sin^2)."""
    x_rest = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.4, 1e-3, 0.0], [0.3, -1e-3, 2e-4]], np.float32)
    tris = np.array([[0, 1, 2], [1, 0, 3]], np.int32)
    top, par, st = gs.cloth_mesh(x_rest, tris, tri_ke=300.0, tri_ka=200.0, tri_kd=0.0, bend_ke=0.0).build()
    gram_inv, rest_area = rest_shapes(par.cloth.rest_x, top.cloth.triangles)
    x = (x_rest * np.array([1.02, 1.3, 1.0], np.float32) + np.float32(1e-4) * x_rest[:, :1] * [0, 0, 1])
    corners = [x[tris[:, k]] for k in range(3)]
    zeros = [np.zeros_like(c) for c in corners]
    c = par.cloth
    args = (*corners, *zeros, gram_inv, rest_area, c.tri_ke, c.tri_ka, c.tri_kd, c.tri_activation)
    f32 = np.asarray(jax.vmap(triangle_force)(*args), np.float64)
    with jax.enable_x64(True):
        f64 = np.asarray(jax.vmap(triangle_force)(*(jnp.asarray(np.asarray(a), jnp.float64) for a in args)))
    assert np.abs(f64).max() > 1.0
    np.testing.assert_allclose(f32, f64, atol=5e-4 * np.abs(f64).max())


def test_bending_kernel_equals_the_formula_of_bending_directions_with_damping(x64):
    """The component-wise kernel against -|e| (ke (theta - rest) + kd sum d . v) d from `bending_directions`
    (cross products and stacks), with damping, at random hinges and velocities, and in its gradient."""
    from gradsim_jax.physics.cloth import bending_directions

    rng = np.random.default_rng(7)
    xs = jnp.asarray(rng.standard_normal((64, 4, 3)))
    vs = jnp.asarray(rng.standard_normal((64, 4, 3)))
    ke, kd, rest = jnp.asarray(rng.uniform(0.5, 2.0, 64)), jnp.asarray(rng.uniform(0.0, 0.3, 64)), jnp.asarray(
        rng.uniform(-1.0, 1.0, 64))

    def reference(x, v, ke, kd, rest):
        d, e_len, valid, theta = bending_directions(x)
        return jnp.where(valid, d * (-e_len * (ke * (theta - rest) + kd * jnp.sum(d * v))), 0.0)

    def kernel(x, v, ke, kd, rest):
        return jnp.stack(bending_force(*x, *v, ke, kd, rest))

    np.testing.assert_allclose(jax.jit(jax.vmap(kernel))(xs, vs, ke, kd, rest),
                               jax.jit(jax.vmap(reference))(xs, vs, ke, kd, rest), rtol=1e-10, atol=1e-12)
    w = jnp.asarray(rng.standard_normal((64, 4, 3)))
    grads = [jax.jit(jax.grad(lambda x, v, fn=fn: jnp.sum(w * jax.vmap(fn)(x, v, ke, kd, rest)), argnums=(0, 1)))(
        xs, vs) for fn in (kernel, reference)]  # compiled: op by op this test took 8 s
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)
