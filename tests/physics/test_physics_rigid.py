"""Rigid bodies: conservation, analytic motions, ground contact (penalty and impulse), pushes, gradients
against finite differences, empty components, no recompilation, and input validation."""

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.physics.quaternion import (
    quat_conjugate, quat_from_axis_angle, quat_multiply, quat_normalize, quat_rotate, quat_to_matrix,
)
from gradsim_jax.physics.rigid import (
    RigidParams, RigidState, RigidTopology, angular_momentum, kinetic_energy, linear_momentum, rigid_forces,
    rigid_step, world_inertia, world_vertices,
)
from gradsim_jax.physics.validate import validate_rigid
from gradsim_jax.physics.world import World

G = 9.81


def _box(size):
    """Gyration [3, 3] (inertia / mass) and the 8 corner vertices [8, 3] of a solid box."""
    a, b, c = size
    gyration = np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) / 12.0
    return gyration, np.array(list(itertools.product([-0.5, 0.5], repeat=3))) * np.asarray(size)


def _bodies(sizes, masses, contact="penalty", ke=2e4, kd=100.0, kf=100.0, mu=0.5, e=0.5, pushes=(),
            dtype=jnp.float32):
    """Boxes of the given sizes; pushes: (body, force [3], body point [3], start, end)."""
    boxes = [_box(s) for s in sizes]
    b, k = len(sizes), len(pushes)
    arr = lambda a, shape: jnp.asarray(np.asarray(a, np.float64).reshape(shape), dtype)
    per_body = lambda value: arr(np.broadcast_to(value, (b,)), (b,))
    top = RigidTopology(
        vertex_body=jnp.asarray(np.repeat(np.arange(b), 8), jnp.int32),
        push_body=jnp.asarray([p[0] for p in pushes], jnp.int32).reshape(k),
        faces=jnp.zeros((0, 3), jnp.int32), contact=contact)
    par = RigidParams(
        mass=arr(masses, (b,)), gyration=arr([g for g, _ in boxes], (b, 3, 3)),
        vertices=arr(np.concatenate([v for _, v in boxes]) if b else [], (8 * b, 3)),
        contact_ke=per_body(ke), contact_kd=per_body(kd), contact_kf=per_body(kf), contact_mu=per_body(mu),
        restitution=per_body(e), push_force=arr([p[1] for p in pushes], (k, 3)),
        push_point=arr([p[2] for p in pushes], (k, 3)), push_start=arr([p[3] for p in pushes], (k,)),
        push_end=arr([p[4] for p in pushes], (k,)))
    return top, par


def _world(gravity=(0.0, -G, 0.0), dtype=jnp.float32):
    return World(gravity=jnp.asarray(gravity, dtype), ground_height=jnp.asarray(0.0, dtype),
                 ground_normal=jnp.asarray([0.0, 1.0, 0.0], dtype))


def _state(x, q=None, v=None, w=None, dtype=jnp.float32):
    b = len(x)
    arr = lambda a, default: jnp.asarray(np.asarray(default if a is None else a, np.float64).reshape(b, -1), dtype)
    return RigidState(x=arr(x, None), q=arr(q, np.tile([1.0, 0.0, 0.0, 0.0], (b, 1))),
                      v=arr(v, np.zeros((b, 3))), w=arr(w, np.zeros((b, 3))))


def _rollout(top, par, world, state, steps, dt):
    """States after each of `steps` steps from t = 0: a RigidState of [steps, b, ...] arrays."""

    def body(s, i):
        s = rigid_step(top, par, world, s, i * dt, dt)
        return s, s

    return jax.lax.scan(body, state, jnp.arange(steps))[1]


def _body_frame_w(traj):
    return jnp.einsum("tbji,tbj->tbi", quat_to_matrix(traj.q), traj.w)


# --- quaternions -------------------------------------------------------------------------------------

def test_quaternion_algebra_and_finite_gradients_at_identity():
    q = quat_from_axis_angle(jnp.array([1.0, 2.0, -0.5]), 0.9)
    p = jnp.array([0.3, -1.0, 2.0])
    np.testing.assert_allclose(quat_rotate(q, p), quat_to_matrix(q) @ p, atol=1e-6)
    pq = jnp.concatenate([jnp.zeros(1), p])
    np.testing.assert_allclose(quat_multiply(quat_multiply(q, pq), quat_conjugate(q))[1:], quat_rotate(q, p), atol=1e-6)
    r = quat_from_axis_angle(jnp.array([0.0, 1.0, 0.0]), 0.4)
    np.testing.assert_allclose(quat_to_matrix(quat_multiply(r, q)), quat_to_matrix(r) @ quat_to_matrix(q), atol=1e-6)
    np.testing.assert_allclose(quat_from_axis_angle(jnp.zeros(3), 0.7), [1.0, 0.0, 0.0, 0.0])

    identity = jnp.array([1.0, 0.0, 0.0, 0.0])
    grads = [
        jax.grad(lambda q: jnp.sum(quat_to_matrix(quat_normalize(q)) * jnp.arange(9.0).reshape(3, 3)))(identity),
        jax.grad(lambda a: jnp.sum(quat_from_axis_angle(jnp.array([0.0, 0.0, 1.0]), a)))(0.0),
        jax.grad(lambda axis: jnp.sum(quat_from_axis_angle(axis, 0.0)))(jnp.zeros(3)),
        jax.grad(lambda axis: jnp.sum(quat_from_axis_angle(axis, 0.3)))(jnp.zeros(3)),
        jax.grad(lambda q: jnp.sum(quat_normalize(q)))(jnp.zeros(4)),
    ]
    for g in grads:
        assert np.all(np.isfinite(np.asarray(g)))


# --- free motion ---------------------------------------------------------------------------------------

def test_torque_free_tumbling_conserves_angular_momentum(x64):
    # The explicit gyroscopic term makes the drift first order: about 0.2 (dt |w|)^2 per step, relative.
    dt, steps = 5e-4, 1000
    top, par = _bodies([(1.0, 2.0, 3.0)], [2.0], contact="none", dtype=jnp.float64)
    world = _world((0.0, 0.0, 0.0), jnp.float64)
    q0 = quat_from_axis_angle(jnp.array([1.0, 2.0, 3.0]), 0.7)[None]
    st = _state([[0.0, 1.0, 0.0]], q=q0, v=[[0.1, 0.2, 0.3]], w=[[0.31, 1.03, 0.52]], dtype=jnp.float64)
    traj = jax.jit(lambda s: _rollout(top, par, world, s, steps, dt))(st)
    l0 = angular_momentum(par, st)[0]
    l = jax.jit(jax.vmap(lambda s: angular_momentum(par, s)))(traj)[:, 0]
    drift = float(jnp.max(jnp.linalg.norm(l - l0, axis=-1)) / jnp.linalg.norm(l0))
    energy = jax.jit(jax.vmap(lambda s: kinetic_energy(par, s)))(traj)[:, 0]
    energy_drift = float(jnp.max(jnp.abs(energy / kinetic_energy(par, st)[0] - 1.0)))
    print(f"tumbling: angular momentum drift {drift:.2e}, energy drift {energy_drift:.2e}")
    assert drift < 1e-4
    assert energy_drift < 1e-4
    np.testing.assert_allclose(linear_momentum(par, traj)[-1, 0], [0.2, 0.4, 0.6], rtol=1e-12)
    # The body turned noticeably (this is not a trivial near-static check).
    assert float(jnp.abs(traj.q[-1, 0] @ q0[0])) < 0.99


def test_intermediate_axis_flips_and_the_others_do_not():
    dt, steps, spin, tiny = 1e-3, 3000, 6.0, 0.01
    top, par = _bodies([(1.0, 2.0, 3.0)], [2.0], contact="none")
    world = _world((0.0, 0.0, 0.0))
    # Principal moments of the 1 x 2 x 3 box: largest about x, intermediate about y, smallest about z.
    w0 = jnp.full((3, 3), tiny) + jnp.diag(jnp.full(3, spin - tiny))

    def run(w):
        st = RigidState(x=jnp.zeros((1, 3)), q=jnp.array([[1.0, 0.0, 0.0, 0.0]]), v=jnp.zeros((1, 3)), w=w[None])
        return _body_frame_w(_rollout(top, par, world, st, steps, dt))[:, 0]

    wb = jax.jit(jax.vmap(run))(w0)
    largest, intermediate, smallest = wb[0, :, 0], wb[1, :, 1], wb[2, :, 2]
    assert float(jnp.min(intermediate)) < -0.5 * spin
    assert float(jnp.min(largest)) > 0.9 * spin
    assert float(jnp.min(smallest)) > 0.9 * spin


def test_free_fall_is_the_exact_discrete_parabola_and_kinematic_bodies_stay():
    dt, steps = 1e-2, 50
    top, par = _bodies([(0.2, 0.2, 0.2), (0.2, 0.2, 0.2)], [1.5, 0.0], contact="penalty")
    world = _world((0.5, -G, 0.0))
    st = _state([[0.0, 5.0, 0.0], [1.0, 0.05, 0.0]], v=[[1.0, 2.0, -0.5], [0.3, 0.0, 0.0]],
                q=[[0.8, 0.6, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    traj = jax.jit(lambda s: _rollout(top, par, world, s, steps, dt))(st)
    k = np.arange(1, steps + 1)[:, None]
    g, x0, v0 = np.asarray(world.gravity), np.asarray(st.x[0]), np.asarray(st.v[0])
    # Semi-implicit Euler: v_k = v0 + k dt g, x_k = x0 + k dt v0 + dt^2 g k (k + 1) / 2 = continuous + g t dt / 2.
    np.testing.assert_allclose(traj.x[:, 0], x0 + k * dt * v0 + dt * dt * g * k * (k + 1) / 2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(traj.v[:, 0], v0 + k * dt * g, rtol=1e-5, atol=1e-5)
    t = k * dt
    np.testing.assert_allclose(traj.x[:, 0], x0 + v0 * t + g * t * t / 2, atol=0.6 * G * dt * t.max())
    np.testing.assert_allclose(traj.q[:, 0], np.broadcast_to(st.q[0], (steps, 4)), atol=1e-6)
    # The mass-0 body (half below the ground, with a velocity) is kinematic: nothing moves it.
    for field in ("x", "q", "v", "w"):
        np.testing.assert_array_equal(getattr(traj, field)[-1, 1], getattr(st, field)[1])


# --- ground contact ------------------------------------------------------------------------------------

@pytest.mark.parametrize("contact", ["penalty", "impulse"])
def test_dropped_box_comes_to_rest_on_the_ground(contact):
    size, dt, steps = 0.2, 1e-3, 2000
    top, par = _bodies([(size, size, size)], [1.0], contact=contact, ke=2e4, kd=100.0, kf=100.0, mu=0.5, e=0.5)
    world = _world()
    q0 = quat_from_axis_angle(jnp.array([1.0, 0.0, 1.0]), 0.3)[None]
    st = _state([[0.0, 0.25, 0.0]], q=q0, w=[[1.0, 2.0, 0.0]])

    def run(s):
        traj = _rollout(top, par, world, s, steps, dt)
        last = jax.tree.map(lambda a: a[-1], traj)
        return last, jnp.min(world_vertices(top, par, last)[:, 1])

    last, lowest = jax.jit(run)(st)
    penetration = max(-float(lowest), 0.0)
    print(f"{contact}: rest |v| {float(jnp.max(jnp.abs(last.v))):.2e} |w| {float(jnp.max(jnp.abs(last.w))):.2e} "
          f"penetration {penetration:.2e} m")
    assert float(jnp.max(jnp.abs(last.v))) < 1e-3
    assert float(jnp.max(jnp.abs(last.w))) < 1e-2
    assert penetration < 0.01 * size
    # Resting on a face: COM at half the size above the ground (less the penetration).
    assert abs(float(last.x[0, 1]) - 0.5 * size) < 0.01 * size


def test_coulomb_slide_stops_after_v0_squared_over_2_mu_g():
    size, mass, mu, v0, ke, dt, steps = 0.2, 1.0, 0.4, 1.5, 2e4, 1e-3, 600
    # kf is large enough that the vertices slide (kf |vt| > mu |fn|) down to |vt| ~ 1 cm/s, small enough
    # that the explicit viscous branch is stable (dt 4 kf / m < 2).
    top, par = _bodies([(size, size, size)], [mass], contact="penalty", ke=ke, kd=100.0, kf=300.0, mu=mu)
    y0 = 0.5 * size - mass * G / (4 * ke)  # at its resting penetration: no bounce
    st = _state([[0.0, y0, 0.0]], v=[[v0 * 0.8, 0.0, v0 * 0.6]])
    traj = jax.jit(lambda s: _rollout(top, par, _world(), s, steps, dt))(st)
    travelled = float(jnp.linalg.norm(traj.x[-1, 0, ::2] - st.x[0, ::2]))
    expected = v0 * v0 / (2 * mu * G)
    print(f"slide: {travelled:.4f} m, expected {expected:.4f} m, error {travelled / expected - 1:+.2%}")
    assert abs(travelled / expected - 1.0) < 0.05
    assert float(jnp.linalg.norm(traj.v[-1, 0])) < 0.02


def test_restitution_bounce_apex_is_e_squared_h():
    h, size, dt, steps = 1.0, 0.2, 1e-3, 1500
    es = jnp.array([0.5, 0.65, 0.8])
    top, par = _bodies([(size, size, size)], [1.0], contact="impulse")
    st = _state([[0.0, h + 0.5 * size, 0.0]])

    def apex(e):
        p = dataclasses.replace(par, restitution=e[None])
        bottom = _rollout(top, p, _world(), st, steps, dt).x[:, 0, 1] - 0.5 * size
        first_impact = jnp.argmin(jnp.where(jnp.arange(steps) < 700, bottom, jnp.inf))
        return jnp.max(jnp.where(jnp.arange(steps) > first_impact, bottom, -jnp.inf))

    apexes = np.asarray(jax.jit(jax.vmap(apex))(es))
    ratio = apexes / (np.asarray(es) ** 2 * h)
    print("bounce apex / (e^2 h):", ratio)
    np.testing.assert_allclose(ratio, 1.0, atol=0.05)


# --- pushes ---------------------------------------------------------------------------------------------

def test_push_gives_momentum_and_torque():
    dt, steps, mass = 1e-3, 100, 2.0
    force = np.array([1.0, 2.0, -0.5])
    side = np.array([1.0, 0.0, 0.0])
    # Windows at half steps: active for the 40 steps t = 10 dt ... 49 dt.
    pushes = [(0, force, [0.0, 0.0, 0.0], 9.5 * dt, 49.5 * dt), (1, side, [0.0, 0.5, 0.0], 9.5 * dt, 49.5 * dt)]
    top, par = _bodies([(1.0, 2.0, 3.0)] * 2, [mass, mass], contact="none", pushes=pushes)
    st = _state([[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]])
    world = _world((0.0, 0.0, 0.0))
    f0, tau0 = rigid_forces(top, par, world, st, 20 * dt)
    np.testing.assert_allclose(f0, [force, side], rtol=1e-6)
    np.testing.assert_allclose(tau0[1], np.cross([0.0, 0.5, 0.0], side), rtol=1e-6)
    assert float(jnp.max(jnp.abs(rigid_forces(top, par, world, st, 60 * dt)[0]))) == 0.0
    last = jax.tree.map(lambda a: a[-1], jax.jit(lambda s: _rollout(top, par, world, s, steps, dt))(st))
    duration = 40 * dt
    np.testing.assert_allclose(last.v[0], force * duration / mass, rtol=1e-4)
    np.testing.assert_allclose(last.w[0], 0.0, atol=1e-7)
    np.testing.assert_allclose(last.v[1], side * duration / mass, rtol=1e-4)
    torque = np.cross([0.0, 0.5, 0.0], side)
    expected_w = np.linalg.solve(mass * np.asarray(par.gyration[1]), torque) * duration
    np.testing.assert_allclose(last.w[1], expected_w, rtol=1e-4, atol=1e-7)


# --- gradients --------------------------------------------------------------------------------------------

def _check_directional_gradients(loss, theta, eps=2e-6, rtol=1e-4, seed=0):
    """Compare d loss / d theta[name] . u with fourth-order central differences along a random u, for every
    leaf (the stiff contact makes second-order differences too curved at a step that rounding allows)."""
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    _, grad = value_and_grad(theta)
    rng = np.random.default_rng(seed)
    for name in theta:
        u = jnp.asarray(rng.normal(size=np.shape(theta[name])))
        shifted = lambda s: {**theta, name: theta[name] + s * eps * u}
        f = lambda s: value_and_grad(shifted(s))[0]
        numeric = (8.0 * (f(1.0) - f(-1.0)) - (f(2.0) - f(-2.0))) / (12.0 * eps)
        analytic = jnp.sum(grad[name] * u)
        assert np.isfinite(float(analytic)), name
        assert abs(float(analytic - numeric)) <= rtol * max(abs(float(numeric)), 1e-3), (name, analytic, numeric)


def _final_state_loss(traj):
    last = jax.tree.map(lambda a: a[-1], traj)
    weights = jnp.linspace(0.5, 1.5, 13)
    flat = jnp.concatenate([last.x.ravel(), last.q.ravel(), last.v.ravel(), last.w.ravel()])
    return jnp.sum(flat * jnp.resize(weights, flat.shape))


def test_penalty_contact_gradients_match_finite_differences(x64):
    """Two boxes on the ground, 80 steps, both sinking (overdamped: kd > 2 sqrt(ke m / 4)) towards their
    resting penetration, so that every bottom vertex keeps v_n < 0 (clear of the kd kink at v_n = 0):
    A slides and yaws (Coulomb branch); B, pushed below the Coulomb limit, sticks (viscous kf branch)."""
    dt, steps, size = 1e-3, 80, 0.2
    masses, ke = np.array([1.0, 0.8]), np.array([2e3, 2.5e3])
    pushes = [(1, [1.2, 0.0, 0.4], [0.0, 0.0, 0.05], -1.0, 1.0)]
    top, par = _bodies([(size, size, size)] * 2, masses, contact="penalty", ke=ke, kd=100.0, kf=100.0,
                       mu=[0.25, 0.5], pushes=pushes, dtype=jnp.float64)
    world = _world(dtype=jnp.float64)
    y0 = 0.5 * size - np.array([3e-4, 2e-4])
    q0 = quat_from_axis_angle(jnp.array([0.0, 1.0, 0.0]), jnp.array([0.2, -0.1]))
    theta = {
        "mass": par.mass, "gyration_scale": jnp.float64(1.0), "ke": par.contact_ke, "kd": par.contact_kd,
        "kf": par.contact_kf, "mu": par.contact_mu, "push": jnp.float64(1.0),
        "x": jnp.array([[0.0, y0[0], 0.0], [1.0, y0[1], 0.0]]), "q": q0,
        "v": jnp.array([[1.0, -0.02, 0.4], [0.0, -0.02, 0.0]]), "w": jnp.array([[0.0, 0.3, 0.0], [0.0, 0.0, 0.0]]),
    }

    def simulate(theta):
        p = dataclasses.replace(par, mass=theta["mass"], gyration=par.gyration * theta["gyration_scale"],
                                contact_ke=theta["ke"], contact_kd=theta["kd"], contact_kf=theta["kf"],
                                contact_mu=theta["mu"], push_force=par.push_force * theta["push"])
        s = RigidState(x=theta["x"], q=theta["q"], v=theta["v"], w=theta["w"])
        return p, _rollout(top, p, world, s, steps, dt)

    # The scene keeps clear of switching points: bottom vertices stay in contact and top ones out of it,
    # the sliding box slides and the pushed box sticks at every step.
    p, traj = jax.jit(simulate)(theta)
    r = jnp.einsum("tmij,mj->tmi", quat_to_matrix(traj.q)[:, top.vertex_body], p.vertices)
    c = traj.x[:, top.vertex_body, 1] + r[..., 1]
    bottom = np.asarray(p.vertices[:, 1] < 0)
    assert float(jnp.max(c[:, bottom])) < -1e-5 and float(jnp.min(c[:, ~bottom])) > 0.1
    point_v = traj.v[:, top.vertex_body] + jnp.cross(traj.w[:, top.vertex_body], r)
    slip = jnp.linalg.norm(point_v[..., ::2], axis=-1)
    fn = -c * p.contact_ke[top.vertex_body] - jnp.minimum(point_v[..., 1], 0.0) * p.contact_kd[top.vertex_body]
    sliding_margin = p.contact_kf[top.vertex_body] * slip - p.contact_mu[top.vertex_body] * fn  # kf |vt| - mu |fn|
    assert float(jnp.min(sliding_margin[:, :8][:, bottom[:8]])) > 0.5
    assert float(jnp.max(sliding_margin[:, 8:][:, bottom[8:]])) < -0.2
    assert float(jnp.max(point_v[..., 1][:, bottom])) < -1e-4  # sinking: off the kd kink

    _check_directional_gradients(lambda th: _final_state_loss(simulate(th)[1]), theta)


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores); `make test-all` runs it
def test_impulse_contact_gradients_match_finite_differences(x64):
    """A tilted spinning box hits the ground on one corner and bounces (restitution, friction), 60 steps."""
    dt, steps, size = 1e-3, 60, 0.2
    top, par = _bodies([(size, size, size)], [1.0], contact="impulse", mu=0.3, e=0.6, dtype=jnp.float64)
    world = _world(dtype=jnp.float64)
    q0 = quat_normalize(jnp.array([[0.95, 0.2, 0.1, 0.15]]))
    theta = {
        "mass": par.mass, "gyration_scale": jnp.float64(1.0), "e": par.restitution, "mu": par.contact_mu,
        "x": jnp.array([[0.0, 0.19, 0.0]]), "q": q0, "v": jnp.array([[0.4, -1.5, 0.2]]),
        "w": jnp.array([[0.5, -1.0, 2.0]]),
    }

    def simulate(theta):
        p = dataclasses.replace(par, mass=theta["mass"], gyration=par.gyration * theta["gyration_scale"],
                                restitution=theta["e"], contact_mu=theta["mu"])
        return _rollout(top, p, world, RigidState(x=theta["x"], q=theta["q"], v=theta["v"], w=theta["w"]), steps, dt)

    traj = jax.jit(simulate)(theta)
    assert float(traj.v[-1, 0, 1]) > 0.1  # it bounced
    # Every step's contact test (c + dt min(v_n, 0) <= 0, on the velocities after gravity and the
    # gyroscopic term) is clear of its threshold.
    states = jax.tree.map(lambda s0, t: jnp.concatenate([s0[None], t[:-1]]), RigidState(**{
        k: theta[k] for k in ("x", "q", "v", "w")}), traj)
    rotation = quat_to_matrix(states.q)[:, 0]
    r = jnp.einsum("tij,mj->tmi", rotation, par.vertices)
    inertia = rotation @ par.gyration[0] @ jnp.swapaxes(rotation, -1, -2)
    w = states.w[:, 0] - dt * jnp.linalg.solve(inertia, jnp.cross(states.w[:, 0], jnp.einsum(
        "tij,tj->ti", inertia, states.w[:, 0]))[..., None])[..., 0]
    vn = states.v[:, 0, None, 1] - dt * G + jnp.cross(w[:, None], r)[..., 1]
    test = states.x[:, 0, None, 1] + r[..., 1] + dt * jnp.minimum(vn, 0.0)
    assert float(jnp.min(jnp.abs(test))) > 1e-5
    assert int(jnp.sum(test <= 0.0)) > 0
    _check_directional_gradients(lambda th: _final_state_loss(simulate(th)), theta)


# --- structure -------------------------------------------------------------------------------------------

def test_empty_component_and_no_recompilation():
    top, par = _bodies([], [], contact="impulse")
    st = RigidState(x=jnp.zeros((0, 3)), q=jnp.zeros((0, 4)), v=jnp.zeros((0, 3)), w=jnp.zeros((0, 3)))
    validate_rigid(top, par, st)
    assert rigid_step(top, par, _world(), st, 0.0, 1e-3) is st
    force, torque = rigid_forces(dataclasses.replace(top, contact="penalty"), par, _world(), st, 0.0)
    assert force.shape == torque.shape == (0, 3)
    assert world_vertices(top, par, st).shape == (0, 3)

    traces = []

    def step(top, par, st):
        traces.append(1)
        return rigid_step(top, par, _world(), st, 0.0, 1e-3)

    step = jax.jit(step)
    top, par = _bodies([(0.2, 0.3, 0.4)], [1.0], contact="penalty")
    st = _state([[0.0, 0.1, 0.0]], v=[[0.0, -1.0, 0.0]])
    a = step(top, par, st)
    other = dataclasses.replace(par, mass=par.mass * 2.0, contact_ke=par.contact_ke * 3.0)
    b = step(top, other, st)
    assert len(traces) == 1
    assert a.x.dtype == st.x.dtype and not np.allclose(a.v, b.v)
    np.testing.assert_allclose(world_inertia(par, st)[0], np.asarray(par.gyration[0]), rtol=1e-6)


def test_validate_rigid_errors():
    top, par = _bodies([(0.2, 0.2, 0.2)] * 2, [1.0, 2.0], pushes=[(1, [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.0, 1.0)])
    st = _state([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    validate_rigid(top, par, st)
    cases = [
        (top, dataclasses.replace(par, gyration=par.gyration[:, :2]), st, "Params.rigid.gyration has shape"),
        (top, dataclasses.replace(par, vertices=par.vertices[:-1]), st, "Params.rigid.vertices has shape"),
        (top, par, dataclasses.replace(st, q=st.q[:, :3]), "State.rigid.q has shape"),
        (top, dataclasses.replace(par, mass=jnp.array([1.0, -2.0])), st, r"Params.rigid.mass\[1\] is negative"),
        (top, par, dataclasses.replace(st, q=st.q.at[1, 0].set(1.1)), r"State.rigid.q\[1\] has norm 1.1"),
        (dataclasses.replace(top, vertex_body=top.vertex_body.at[3].set(2)), par, st,
         r"RigidTopology.vertex_body\[3\] = 2 is out of range \[0, 2\)"),
        (dataclasses.replace(top, push_body=jnp.array([-1], jnp.int32)), par, st, r"RigidTopology.push_body\[0\]"),
        (top, dataclasses.replace(par, gyration=par.gyration.at[0, 0, 1].set(0.5)), st, "not symmetric"),
        (top, dataclasses.replace(par, restitution=jnp.array([0.5, 1.5])), st, r"restitution\[1\]"),
        (top, par, dataclasses.replace(st, v=st.v.at[0, 2].set(jnp.nan)), r"State.rigid.v\[0, 2\] is not finite"),
        (dataclasses.replace(top, contact="springy"), par, st, "RigidTopology.contact"),
    ]
    for t, p, s, message in cases:
        with pytest.raises(ValueError, match=message):
            validate_rigid(t, p, s)
    with pytest.raises(TypeError, match="RigidTopology.contact"):
        validate_rigid(dataclasses.replace(top, contact=None), par, st)
    # Under jit only shapes are checked (values are traced).
    jax.jit(lambda p: validate_rigid(top, p, st) or 0.0)(dataclasses.replace(par, mass=jnp.array([1.0, -2.0])))
