"""The FEM soft-body system-identification scenes (`scenes/fem.py`) and quantities: names and
aliases, density expands to lumped masses (the material's recovery from 50 % off on a reduced demo scene:
tests/cli/test_cli_fem.py)."""

import types

import jax.numpy as jnp
import numpy as np

from gradsim_jax import sysid
from gradsim_jax.geometry import soft_body
from gradsim_jax.geometry.tets import box_tets, tet_volumes
from gradsim_jax.sysid.quantities import QUANTITIES, assemble, canonical


def test_fem_quantities_answer_to_their_params_paths_and_builder_names():
    for name, aliases in {"fem_mu": ("fem.k_mu", "k_mu", "tet_k_mu"),
                          "fem_lambda": ("fem.k_lambda", "k_lambda", "tet_k_lambda"),
                          "fem_damping": ("fem.k_damp", "k_damp", "tet_k_damp"),
                          "density": ("fem_density",), "particle_mass": ("masses",)}.items():
        assert all(canonical(a) == name for a in (name, *aliases))
    assert QUANTITIES["fem_mu"].unit == "Pa" and QUANTITIES["density"].unit == "kg/m^3"


def test_density_expands_to_lumped_masses_summing_to_density_times_volume():
    x, t = box_tets((2, 1, 1), (0.3, 0.1, 0.2), pattern=6)
    topology, params, state0 = soft_body(x, t, density=700.0, k_mu=1e3, k_lambda=1e3).build()
    theta = sysid.default_theta(topology, params, state0, ["density", "fem_mu"])
    assert abs(float(theta["density"]) - 700.0) < 1e-2
    # what assemble reads of an Experiment
    exp = types.SimpleNamespace(topology=topology, params=params, state0=state0, dtype=jnp.float32)
    new, _ = assemble(exp, {"density": jnp.asarray(1234.0), "fem_mu": jnp.asarray(5.0)})
    mass = np.asarray(new.particles.mass, np.float64)
    assert abs(mass.sum() - 1234.0 * tet_volumes(x, t).sum()) < 1e-4 * mass.sum()
    np.testing.assert_allclose(mass, np.asarray(params.particles.mass) * 1234.0 / 700.0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(new.fem.k_mu), 5.0)
