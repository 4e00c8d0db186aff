"""A cloth whose membrane coefficients are all 0 builds without the membrane term (Environment.membrane): the same
motion, its drag and lift kept, the membrane's quantities refused, and the switch forced on when asked."""

import jax
import jax.numpy as jnp
import numpy as np

import gradsim_jax as gs
from gradsim_jax.geometry import mesh_edges
from gradsim_jax.physics import ImplicitEuler, particle_forces
from gradsim_jax.sysid import QUANTITIES


def _cloth(**coefficients):
    scene = gs.cloth_grid(4, 3, 0.1, 0.1, pos=(0.0, 1.0, 0.0), rot=(0.7071068, 0.7071068, 0.0, 0.0), mass=0.05,
                          fix_top=True, **coefficients)
    return scene.add_springs(mesh_edges(scene.triangles), 400.0, 0.5)


def test_a_cloth_of_springs_skips_its_membrane_with_the_same_forces_and_motion():
    with jax.enable_x64(True):
        scene = _cloth(tri_ke=0.0, tri_ka=0.0, tri_kd=0.0, tri_drag=0.3, tri_lift=0.2)
        off = scene.build()
        on = scene.build(membrane=True)
        assert not off[0].cloth.membrane and on[0].cloth.membrane and off[0].cloth.aerodynamics
        rng = np.random.default_rng(0)
        x = off[2].particles.x + 0.01 * rng.normal(size=off[2].particles.x.shape)
        v = jnp.asarray(rng.normal(size=x.shape))
        # drag and lift still act without the membrane (the only triangle forces left)
        np.testing.assert_allclose(particle_forces(off[0], off[1], x, v), particle_forces(on[0], on[1], x, v),
                                   rtol=0, atol=1e-12)
        a, b = (gs.simulate(*built, frames=6, substeps=2, frame_dt=1 / 30, integrator=ImplicitEuler(iterations=30))
                for built in (off, on))
        np.testing.assert_allclose(a.particles.x, b.particles.x, rtol=0, atol=1e-10)
    assert not QUANTITIES["stiffness"].applies(off[0]) and not QUANTITIES["damping"].applies(off[0])
    assert QUANTITIES["spring_stiffness"].applies(off[0])
    # any nonzero coefficient keeps it, and a cloth-free scene keeps the default
    assert _cloth(tri_ke=0.0, tri_ka=0.0, tri_kd=0.1).build()[0].cloth.membrane
    assert gs.particles([[0.0, 0.0, 0.0]]).build()[0].cloth.membrane
