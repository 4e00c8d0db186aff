"""A rigid body and a cloth in one scene, one simulation and one video (no body-cloth collision)."""

import jax
import jax.numpy as jnp
import numpy as np

import gradsim_jax as gs
from gradsim_jax.physics import replace_paths
from gradsim_jax.render.mesh import scene_faces, scene_vertices, trajectory_vertices

RUN = dict(frames=6, substeps=16, frame_dt=1 / 60)


def _pieces():
    cloth = gs.cloth_grid(3, 3, 0.1, 0.1, pos=(0.3, 0.5, 0.0), fix_left=True, mass=0.05, tri_ke=100.0,
                          tri_ka=100.0, tri_kd=1.0, bend_ke=0.01)
    box = gs.rigid_body(*gs.box_mesh(0.05, 0.05, 0.05), mass=0.5, pos=(-0.3, 0.3, 0.0), vel=(0.5, 0.0, 0.0),
                        omega=(0.0, 2.0, 1.0), contact_ke=2e4, contact_kd=50.0)
    return cloth, box.add_push(0, (0.0, 2.0, 0.0), point=(0.05, 0.0, 0.0), end=0.05)


def test_mixed_scene_moves_each_part_as_alone():
    cloth, box = _pieces()
    mixed = gs.simulate(*(cloth + box).build(), **RUN)
    alone_cloth = gs.simulate(*cloth.build(), **RUN)
    alone_box = gs.simulate(*box.build(), **RUN)
    assert gs.first_nonfinite(mixed) is None
    np.testing.assert_array_equal(mixed.particles.x, alone_cloth.particles.x)
    np.testing.assert_array_equal(mixed.rigid.x, alone_box.rigid.x)
    np.testing.assert_array_equal(mixed.rigid.q, alone_box.rigid.q)
    assert float(jnp.abs(mixed.rigid.q[-1] - mixed.rigid.q[0]).max()) > 1e-3  # it turned


def test_one_faces_array_renders_both():
    cloth, box = _pieces()
    top, par, st = (cloth + box).build()
    faces = scene_faces(top)
    assert faces.shape == (top.cloth.triangles.shape[0] + 12, 3)
    verts = scene_vertices(top, par, st)
    assert verts.shape == (16 + 8, 3)
    # Body vertices are the hull placed by the pose: the box's centre of mass is where it was put.
    np.testing.assert_allclose(np.asarray(verts[16:]).mean(0), [-0.3, 0.3, 0.0], atol=1e-6)
    camera = gs.look_at_camera(2.0, 10.0, 0.0, at=(0.0, 0.4, 0.0), width=48, height=48)
    alpha = np.asarray(gs.render(camera, verts, jnp.asarray(faces))[..., 3])
    left, right = alpha[:, :20].sum(), alpha[:, 28:].sum()
    assert left > 3 and right > 3  # the box on the left, the cloth on the right, in one image
    traj = gs.simulate(top, par, st, **RUN)
    assert trajectory_vertices(top, par, traj).shape == (RUN["frames"] + 1, 24, 3)


def test_one_loss_differentiates_both_components():
    cloth, box = _pieces()
    top, par, st = (cloth + box).build()

    def loss(body_mass, tri_ke):
        p = replace_paths(par, {"rigid.mass": body_mass, "cloth.tri_ke": tri_ke})
        traj = gs.simulate(top, p, st, **RUN)
        return jnp.sum(trajectory_vertices(top, p, traj)[-1] ** 2)

    g_mass, g_ke = jax.jit(jax.grad(loss, argnums=(0, 1)))(par.rigid.mass, par.cloth.tri_ke)
    assert bool(jnp.all(jnp.isfinite(g_mass))) and bool(jnp.all(jnp.isfinite(g_ke)))
    assert float(jnp.abs(g_mass).max()) > 0 and float(jnp.abs(g_ke).max()) > 0
