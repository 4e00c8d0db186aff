"""Finite-difference checks (float64) of the gradient w.r.t. every `Params` field through >= 50 steps."""


import numpy as np
import jax
import jax.numpy as jnp
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import get_path, replace_paths
from gradsim_jax.fit.transforms import field_names
from gradsim_jax.physics.validate import PARAM_SHAPES

STEPS = 60  # 6 frames x 10 substeps


def _hanging_scene():
    """Cloth hanging from two springs, with bending, aerodynamics, damping and activation (no contact)."""
    cloth = gs.cloth_grid(2, 2, 0.1, 0.1, pos=(0.0, 1.0, 0.0), vel=(0.3, 0.1, -0.4), mass=0.1,
                          tri_ke=60.0, tri_ka=80.0, tri_kd=0.5, tri_drag=0.3, tri_lift=0.2, bend_ke=2.0, bend_kd=0.01)
    anchors = gs.particles([[0.0, 1.3, 0.0], [0.2, 1.3, 0.0]], mass=1.0, pinned=True)
    scene = (cloth + anchors).add_springs([[9, 6], [10, 8]], [30.0, 40.0], [0.5, 0.4])
    top, par, st = scene.build(damping=0.1)
    par = replace_paths(par, {"cloth.tri_activation": par.cloth.tri_activation + 0.05})
    # Out of the rest shape, so that every elastic term is active.
    x = st.particles.x.at[4].add(jnp.array([0.01, -0.02, 0.03]))
    return top, par, gs.particle_state(x, st.particles.v)


def _sliding_scene():
    """Particles in persistent ground contact on a slightly tilted plane, two sliding and one sticking
    (|vt| kf below the Coulomb limit), so that every contact field matters."""
    mass = np.array([0.3, 0.2, 0.3])
    y0 = 0.005 + 0.01 - mass * 9.81 / 2e3  # resting penetration m g / ke
    x0 = np.stack([[0.0, 0.5, 0.1], y0, [0.0, 0.2, -0.3]], axis=1)
    top, par, st = gs.particles(x0, v=[[2.0, 0.0, 0.5], [-1.5, 0.0, 1.0], [0.01, 0.0, 0.005]], mass=mass).build(
        ground=True, ground_height=0.005, ground_normal=(0.02, 1.0, -0.01), contact_ke=2e3, contact_kd=5.0,
        contact_kf=50.0, contact_mu=0.4, particle_radius=0.01)
    return top, par, st


def _loss_fn(top, st, frames):
    def loss(par):
        traj = gs.simulate(top, par, st, frames=frames, substeps=10, frame_dt=1 / 200)
        w = jnp.linspace(0.5, 1.5, traj.particles.x[-1].size).reshape(traj.particles.x[-1].shape)
        return jnp.sum(w * traj.particles.x[-1]) + 0.1 * jnp.sum(w * traj.particles.v[-1])
    return loss


def _check_fields(top, st, par, fields, seed):
    """Directional derivative of the loss along a random direction per field: reverse mode vs central FD."""
    loss = jax.jit(_loss_fn(top, st, STEPS // 10))
    grad = jax.jit(jax.grad(_loss_fn(top, st, STEPS // 10)))(par)
    rng = np.random.default_rng(seed)
    failures = []
    for field in fields:
        value = get_path(par, field)
        direction = jnp.asarray(rng.standard_normal(np.shape(value)))
        analytic = float(jnp.sum(get_path(grad, field) * direction))
        scale = 1e-6 * max(1.0, float(jnp.abs(value).max()))
        shifted = lambda s: loss(replace_paths(par, {field: value + s * scale * direction}))  # noqa: E731
        numeric = float(shifted(1.0) - shifted(-1.0)) / (2 * scale)
        ok = np.isfinite(analytic) and abs(analytic - numeric) <= 1e-5 * max(abs(numeric), 1e-3)
        if not ok or analytic == 0.0:  # every field influences these scenes
            failures.append((field, analytic, numeric))
    assert not failures, failures


CONTACT_FIELDS = ["contact.ke", "contact.kd", "contact.kf", "contact.mu", "world.ground_height",
                  "world.ground_normal", "particles.radius", "particles.mass", "world.gravity"]
# The FEM branch has its own finite-difference checks (test_physics_fem.py).
HANGING_FIELDS = [name for name in PARAM_SHAPES if name not in CONTACT_FIELDS[:-2] and not name.startswith("fem.")]


def test_every_params_field_is_checked():
    # The rigid and FEM branches have their own finite-difference checks (test_physics_rigid.py, _fem.py).
    cloth_fields = {n for n in field_names(_hanging_scene()[1]) if not n.startswith(("rigid.", "fem."))}
    assert set(HANGING_FIELDS) | set(CONTACT_FIELDS) == cloth_fields


def test_gradient_matches_finite_differences_hanging_cloth(x64):
    top, par, st = _hanging_scene()
    _check_fields(top, st, par, HANGING_FIELDS, seed=0)


def test_gradient_matches_finite_differences_ground_contact(x64):
    top, par, st = _sliding_scene()
    _check_fields(top, st, par, CONTACT_FIELDS, seed=1)
