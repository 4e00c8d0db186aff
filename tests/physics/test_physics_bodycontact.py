"""Rigid bodies against each other and against colliders (`physics.bodycontact`): equal and opposite loads,
momentum and energy through a collision, resting heights at the penalty sag, float64 gradients against finite
differences, finite gradients at and near contact (hypothesis), and bad input named."""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gradsim_jax as gs
from gradsim_jax.geometry import collider, combine
from gradsim_jax.geometry.primitives import box_mesh
from gradsim_jax.physics import simulate
from gradsim_jax.physics.bodycontact import body_contact_message, hull_problems
from gradsim_jax.physics.contact import ContactWarning
from gradsim_jax.physics.quaternion import quat_from_axis_angle
from gradsim_jax.physics.rigid import angular_momentum, kinetic_energy, rigid_forces, rigid_step

G = 9.81


def _boxes(specs, *, ground=False, gravity=(0.0, -G, 0.0), dtype=None, extra=(), **build):
    """Scene of boxes: specs of (half extents, mass, pos, keyword arguments of gs.rigid_body)."""
    pieces = []
    for half, mass, pos, kw in specs:
        v, f = box_mesh(*half)
        kw = {"contact_ke": 2e4, "contact_kd": 200.0, "contact_kf": 100.0, "contact_mu": 0.5, **kw}
        pieces.append(gs.rigid_body(v, f, mass=mass, pos=pos, **kw))
    return combine(*pieces, *extra).build(ground=ground, gravity=gravity, dtype=dtype, **build)


def _total_momenta(params, state):
    """Linear momentum [3] and angular momentum about the origin [3] of all bodies."""
    linear = params.mass[:, None] * state.v
    angular = jnp.cross(state.x, linear) + angular_momentum(params, state)
    return linear.sum(0), angular.sum(0)


def test_bodies_push_each_other_with_equal_and_opposite_loads(x64):
    q = quat_from_axis_angle(jnp.array([[0.3, 1.0, 0.2], [1.0, 0.0, 0.4]]), jnp.array([0.4, -0.7]))
    top, par, s0 = _boxes([((0.3, 0.2, 0.25), 2.0, (0.0, 0.0, 0.0), {"contact_mu": 0.3}),
                           ((0.2, 0.2, 0.2), 1.0, (0.15, 0.45, 0.1), {"contact_ke": 1e4})], dtype=jnp.float64)
    state = dataclasses.replace(s0.rigid, q=q, v=jnp.array([[0.1, 0.2, 0.0], [-0.3, -1.0, 0.5]]),
                                w=jnp.array([[0.0, 1.0, 0.5], [2.0, 0.0, -1.0]]))
    force, torque = jax.jit(lambda s: rigid_forces(top.rigid, par.rigid, par.world, s, 0.0))(state)
    scale = float(jnp.max(jnp.abs(force)))
    assert scale > 10.0  # they overlap: real forces
    np.testing.assert_allclose(np.asarray(force.sum(0)), 0.0, atol=1e-12 * scale)
    moment = jnp.cross(state.x, force) + torque
    np.testing.assert_allclose(np.asarray(moment.sum(0)), 0.0, atol=1e-12 * scale)


def test_collision_conserves_momentum_and_frictionless_energy(x64):
    """A box flies into a free box off-centre with no gravity: linear momentum is conserved to rounding, angular
    momentum to the explicit gyroscopic term's O(dt) drift; without damping and friction the kinetic energy after
    the bounce is the energy before, to the step's O(dt omega) error (omega: the contact spring's rate)."""
    kw = {"contact_kd": 0.0, "contact_kf": 0.0, "contact_mu": 0.0}
    top, par, s0 = _boxes([((0.2, 0.2, 0.2), 1.0, (0.0, 0.0, 0.0), kw),
                           ((0.1, 0.1, 0.1), 0.5, (-0.6, 0.12, 0.05), {**kw, "vel": (2.0, 0.0, 0.0)})],
                          gravity=(0.0, 0.0, 0.0), dtype=jnp.float64)
    dt, steps = 2e-4, 2500

    def body(s, i):
        s = rigid_step(top.rigid, par.rigid, par.world, s, i * dt, dt)
        return s, s

    traj = jax.jit(lambda s: jax.lax.scan(body, s, jnp.arange(steps))[1])(s0.rigid)
    last = jax.tree.map(lambda a: a[-1], traj)
    p0, l0 = _total_momenta(par.rigid, s0.rigid)
    p1, l1 = _total_momenta(par.rigid, last)
    assert float(jnp.linalg.norm(last.v[0])) > 0.5  # the struck box moves
    np.testing.assert_allclose(np.asarray(p1), np.asarray(p0), atol=1e-12)
    assert float(jnp.linalg.norm(l1 - l0)) < 1e-3 * float(jnp.linalg.norm(p0)) * 0.6
    e0, e1 = float(kinetic_energy(par.rigid, s0.rigid).sum()), float(kinetic_energy(par.rigid, last).sum())
    omega = np.sqrt(10 * 2e4 / 0.5)  # the ten contact points of the small box's face on the big one, at most
    assert abs(e1 - e0) <= dt * omega * e0, (e0, e1)


def test_a_box_stacked_square_on_a_box_of_its_footprint_rests_on_its_face():
    """Two equal boxes, the upper placed square on the lower (kinematic): its bottom corners lie on the lower
    box's side planes (signed distance 0, no force: corners alone would let it sink through). The six inset
    points of its bottom face inside the lower box and the lower box's six inside it carry it, at the sag
    m g / (12 ke)."""
    ke, mass, half = 2e4, 1.0, 0.1
    kw = {"contact_ke": ke, "contact_kd": 60.0}
    top, par, s0 = _boxes([((half,) * 3, 1.0, (0.0, half, 0.0), kw), ((half,) * 3, mass, (0.0, 3 * half, 0.0), kw)])
    par = dataclasses.replace(par, rigid=dataclasses.replace(par.rigid, mass=par.rigid.mass.at[0].set(0.0)))
    y = np.asarray(simulate(top, par, s0, frames=20, frame_dt=1 / 30, substeps=30).rigid.x[:, 1, 1])
    sag = mass * G / (12 * ke)
    assert abs(y[-1] - (3 * half - sag)) < 0.02 * sag


@pytest.mark.parametrize("support", ["body", "collider"])
def test_a_box_rests_on_a_box_at_its_penalty_sag(support):
    """A 1 kg box dropped 2 cm onto a fixed box (a kinematic body, or a static box collider) settles at the top
    face plus its half height less the sag m g / (10 ke) of the ten contact points of its bottom face (four
    corners, and the three inset corners of each of its two triangles)."""
    ke, mass, half, points = 2e4, 1.0, 0.1, 10
    upper = ((half, half, half), mass, (0.05, 0.5 + half + 0.02, 0.0), {"contact_ke": ke, "contact_kd": 100.0})
    if support == "body":
        top, par, s0 = _boxes([((0.5, 0.25, 0.5), 1.0, (0.0, 0.25, 0.0), {"contact_ke": ke, "contact_kd": 100.0}),
                               upper])
        par = dataclasses.replace(par, rigid=dataclasses.replace(par.rigid, mass=par.rigid.mass.at[0].set(0.0)))
        index = 1
    else:
        top, par, s0 = _boxes([upper], extra=[collider("box", (0.0, 0.25, 0.0), half_extents=(0.5, 0.25, 0.5),
                                                       ke=ke, kd=100.0)])
        index = 0
    traj = simulate(top, par, s0, frames=40, frame_dt=1 / 30, substeps=30)
    y = np.asarray(traj.rigid.x[:, index, 1])
    sag = mass * G / (points * ke)
    assert abs(y[-1] - (0.5 + half - sag)) < 0.02 * sag
    assert np.ptp(y[-5:]) < 1e-6


def test_box_on_box_gradients_match_finite_differences(x64):
    """A box slides and spins on a free box that stands on the ground, 60 steps, both sinking towards their
    resting penetration (overdamped), every contact vertex sliding: d final state / d (masses, the pair's and
    the ground's coefficients, the upper box's pose and velocity) against fourth-order central differences."""
    dt, steps = 1e-3, 60
    top, par, s0 = _boxes([((0.3, 0.1, 0.3), 2.0, (0.0, 0.1 - 2e-4, 0.0), {"contact_mu": 0.4, "contact_kd": 100.0}),
                           ((0.1, 0.1, 0.1), 1.0, (0.05, 0.3 - 2e-4 - 5e-5, 0.0),
                            {"contact_mu": 0.2, "contact_kd": 20.0, "vel": (0.8, -0.005, 0.3),
                             "omega": (0.0, 0.5, 0.0)})],
                          ground=True, dtype=jnp.float64)
    theta = {"mass": par.rigid.mass, "ke": par.rigid.contact_ke, "kd": par.rigid.contact_kd,
             "mu": par.rigid.contact_mu, "x": s0.rigid.x, "v": s0.rigid.v}

    def final(theta):
        rp = dataclasses.replace(par.rigid, mass=theta["mass"], contact_ke=theta["ke"], contact_kd=theta["kd"],
                                 contact_mu=theta["mu"])
        s = dataclasses.replace(s0.rigid, x=theta["x"], v=theta["v"])
        s = jax.lax.fori_loop(0, steps, lambda i, s: rigid_step(top.rigid, rp, par.world, s, i * dt, dt), s)
        flat = jnp.concatenate([s.x.ravel(), s.q.ravel(), s.v.ravel(), s.w.ravel()])
        return jnp.sum(flat * jnp.linspace(0.5, 1.5, flat.size))

    value_and_grad = jax.jit(jax.value_and_grad(final))
    _, grad = value_and_grad(theta)
    # The lower box rocks as the upper one drags it: its corners' normal velocities cross the damping's kink at
    # v_n = 0 during the run, and a difference step straddling such a crossing is off; a small step is off by the
    # stiff contact's amplified rounding instead. The gradient must agree at some step of a decade ladder (a wrong
    # one agrees at none).
    rng = np.random.default_rng(0)
    for name in theta:
        u = jnp.asarray(rng.normal(size=np.shape(theta[name]))) * jnp.maximum(jnp.abs(theta[name]), 1.0)
        analytic = float(jnp.sum(grad[name] * u))
        errors = []
        for eps in (1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
            f = lambda s: float(value_and_grad({**theta, name: theta[name] + s * eps * u})[0])  # noqa: E731
            numeric = (8.0 * (f(1.0) - f(-1.0)) - (f(2.0) - f(-2.0))) / (12.0 * eps)
            errors.append(abs(analytic - numeric) / max(abs(numeric), 1e-9))
        assert min(errors) <= 1e-4, (name, analytic, errors)


_TOP, _PAR, _S0 = None, None, None


def _pair():
    global _TOP, _PAR, _S0
    if _TOP is None:
        _TOP, _PAR, _S0 = _boxes([((0.2, 0.1, 0.2), 1.0, (0.0, 0.0, 0.0), {}),
                                  ((0.1, 0.1, 0.1), 0.5, (0.0, 0.2, 0.0), {})],
                                 extra=[collider("sphere", (0.6, 0.0, 0.0), radius=0.2)])
    return _TOP, _PAR, _S0


@settings(max_examples=30, deadline=None)
@given(gap=st.sampled_from([0.0, -1e-3, 1e-3, -0.02, 0.05]), angle=st.floats(-0.8, 0.8),
       shift=st.floats(-0.25, 0.25), slide=st.floats(-0.2, 0.2), speed=st.floats(-1.0, 1.0))
def test_gradients_stay_finite_at_and_near_contact(gap, angle, shift, slide, speed):
    """The upper box sits exactly on (gap 0: bottom corners on the lower box's top face), just inside, just
    above, or clear of the lower box and next to a sphere collider, tilted and moving: the gradient of one step's
    outcome by every state and contact coefficient is finite."""
    top, par, s0 = _pair()
    x = s0.rigid.x.at[1].set(jnp.array([shift, 0.2 + gap, 0.0], s0.rigid.x.dtype))
    x = x.at[0, 0].set(slide + 0.6 * (abs(slide) > 0.15))  # sometimes against the sphere
    q = s0.rigid.q.at[1].set(quat_from_axis_angle(jnp.array([0.0, 0.0, 1.0]), jnp.asarray(angle)) if abs(angle) > 0.4
                             else jnp.array([1.0, 0.0, 0.0, 0.0]))

    def loss(theta):
        rp = dataclasses.replace(par.rigid, contact_ke=theta["ke"], contact_mu=theta["mu"])
        cp = dataclasses.replace(par.colliders, mu=theta["cmu"])
        state = dataclasses.replace(s0.rigid, x=theta["x"], q=theta["q"], v=theta["v"], w=theta["w"])
        s = rigid_step(top.rigid, rp, par.world, state, 0.0, 1e-3, colliders=(top.colliders, cp))
        return jnp.sum(s.x ** 2) + jnp.sum(s.w ** 2) + jnp.sum(s.v ** 2)

    theta = {"ke": par.rigid.contact_ke, "mu": par.rigid.contact_mu, "cmu": par.colliders.mu, "x": x, "q": q,
             "v": jnp.zeros_like(x).at[1, 0].set(speed), "w": jnp.zeros_like(x)}
    grad = _cached_grad(loss)(theta)
    for name, g in grad.items():
        assert np.all(np.isfinite(np.asarray(g))), name


_GRAD = []


def _cached_grad(loss):
    """One compiled gradient for every hypothesis example (the loss's closure is the same scene)."""
    if not _GRAD:
        _GRAD.append(jax.jit(jax.grad(loss)))
    return _GRAD[0]


def test_bad_bodies_are_named():
    # A dented box (one corner pushed in) is not convex: a warning and no body contact by default, an error when
    # asked for.
    v, f = box_mesh(0.1, 0.1, 0.1)
    dented = v.copy()
    dented[np.argmax(v.sum(1))] *= 0.5
    a = gs.rigid_body(v, f, mass=1.0)
    b = gs.rigid_body(dented, f, mass=1.0, pos=(1.0, 0.0, 0.0))
    with pytest.warns(UserWarning, match="rigid body 1 cannot be a solid for body contact: its hull is not convex"):
        top, _, _ = combine(a, b).build()
    assert not top.rigid.collide
    with pytest.raises(ValueError, match="rigid body 1 .*not convex"):
        combine(a, b).build(body_contact=True)
    # An open hull: hull_problems names it; simulate refuses a topology that asks for body contact with it.
    assert "not a closed surface" in hull_problems(np.zeros(8, int), f[:-1], v, 1)[0]
    top, par, s0 = _boxes([((0.1, 0.1, 0.1), 1.0, (0.0, 0.0, 0.0), {}), ((0.1, 0.1, 0.1), 1.0, (1.0, 0.0, 0.0), {})])
    open_top = dataclasses.replace(top, rigid=dataclasses.replace(top.rigid, faces=top.rigid.faces[:-1]))
    with pytest.raises(ValueError, match="rigid body 1 cannot be a solid for body contact: its hull is not a closed"):
        simulate(open_top, par, s0, frames=1)
    # Bodies that start inside each other or inside a collider: a ContactWarning naming them.
    top, par, s0 = _boxes([((0.1, 0.1, 0.1), 1.0, (0.0, 0.0, 0.0), {}), ((0.1, 0.1, 0.1), 1.0, (0.15, 0.0, 0.0), {})],
                          extra=[collider("sphere", (-0.1, -0.1, -0.1), radius=0.05)])
    message = body_contact_message(top.rigid, par.rigid, s0.rigid, (top.colliders, par.colliders))
    assert "rigid body 0 starts inside rigid body 1" in message or "rigid body 1 starts inside rigid body 0" in message
    assert "starts inside collider 0 (sphere)" in message
    with pytest.warns(ContactWarning, match="starts inside rigid body"):
        simulate(top, par, s0, frames=1, substeps=4)
    # Contact too stiff for the step between two free bodies (reduced mass 0.5 kg, ten points of a face).
    top, par, s0 = _boxes([((0.1, 0.1, 0.1), 1.0, (0.0, 0.0, 0.0), {}), ((0.1, 0.1, 0.1), 1.0, (1.0, 0.0, 0.0), {})],
                          gravity=(0.0, 0.0, 0.0))
    message = body_contact_message(top.rigid, par.rigid, s0.rigid, dt=1e-2)
    # dt^2 N ke / m + 2 dt N kd / m = 1e-4 * 10 * 2e4 / 0.5 + 2e-2 * 10 * 200 / 0.5 = 120
    assert "the contact of rigid bodies 0 and 1 is too stiff for the time step 0.01 s" in message and "= 120" in message
    assert body_contact_message(top.rigid, par.rigid, s0.rigid, dt=1e-4) == ""
    # NaN poses are refused before a run.
    bad = dataclasses.replace(s0, rigid=dataclasses.replace(s0.rigid, q=s0.rigid.q.at[1, 0].set(jnp.nan)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="rigid"):
            simulate(top, par, bad, frames=1)


@pytest.mark.parametrize("support", ["collider", "body"])
def test_a_box_sliding_on_a_box_stops_where_coulomb_says(support):
    """A 1 kg box sliding at 1 m/s on a static box (a box collider, or a kinematic body), mu 0.4: semi-implicit
    Euler under the constant deceleration mu g stops it at v0^2 / (2 mu g) - v0 dt / 2 (the viscous branch below
    mu g m / (N kf) = 4 mm/s adds micrometres). NVIDIA Warp 1.8.1 stops the same box within about one frame
    (tools/warp_box_slide_repro.py)."""
    mat = dict(contact_ke=1e4, contact_kd=100.0, contact_kf=100.0, contact_mu=0.4)
    v, f = box_mesh(0.1, 0.08, 0.1)
    box = gs.rigid_body(v, f, mass=1.0, pos=(-0.35, 0.18 - G / (10 * 1e4), 0.0), vel=(1.0, 0.0, 0.0), **mat)
    if support == "collider":
        top, par, s0 = combine(box, collider("box", half_extents=(0.6, 0.1, 0.4), ke=1e4, kd=100.0, kf=100.0,
                                             mu=0.4)).build()
    else:
        base = gs.rigid_body(*box_mesh(0.6, 0.1, 0.4), mass=1.0, **mat)
        top, par, s0 = combine(base, box).build()
        par = dataclasses.replace(par, rigid=dataclasses.replace(par.rigid, mass=par.rigid.mass.at[0].set(0.0)))
    dt = 1.0 / 30.0 / 64
    x = np.asarray(simulate(top, par, s0, frames=12, frame_dt=1.0 / 30.0, substeps=64).rigid.x[:, -1, 0]) + 0.35
    assert abs(x[-1] - (1.0 / (2 * 0.4 * G) - 1.0 * dt / 2)) < 1e-4
    assert np.ptp(x[-3:]) < 1e-6  # stopped
