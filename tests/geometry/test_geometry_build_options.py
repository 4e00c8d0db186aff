"""`Scene.build`'s option records (`geometry.build_options`) and their flat keyword shorthands."""

import dataclasses

import jax
import numpy as np
import pytest

from gradsim_jax.geometry import cloth_grid
from gradsim_jax.geometry.build_options import BUILD_SHORTHANDS, Contact, Environment, Numerics


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


def test_records_build_what_the_flat_keywords_build():
    scene = cloth_grid(3, 3, 0.1, 0.1)
    flat = scene.build(gravity=(0.0, 0.0, -9.8), damping=0.1, ground=True, ground_height=-1.0, contact_ke=500.0,
                       contact_mu=0.2, particle_radius=0.02, contact_smoothing=0.001, self_contact=True,
                       self_contact_ke=50.0, incidence=True)
    grouped = scene.build(environment=Environment(gravity=(0.0, 0.0, -9.8), damping=0.1, ground=True,
                                                  ground_height=-1.0),
                          contact=Contact(ke=500.0, mu=0.2, particle_radius=0.02, smoothing=0.001, self_contact=True,
                                          self_ke=50.0),
                          numerics=Numerics(incidence=True))
    for a, b in zip(flat, grouped):
        assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
        assert _leaves_equal(a, b)
    assert grouped[1].contact.ke == 500.0 and grouped[0].self_contact is not None


def test_every_shorthand_names_a_field_of_its_record():
    records = {"environment": Environment, "contact": Contact, "numerics": Numerics}
    for flat, (group, field) in BUILD_SHORTHANDS.items():
        assert field in {f.name for f in dataclasses.fields(records[group])}, flat


def test_unknown_keyword_is_a_type_error_naming_the_valid_ones():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'gravty'.*contact_ke"):
        cloth_grid(2, 2, 0.1, 0.1).build(gravty=(0.0, -1.0, 0.0))


def test_a_flat_keyword_with_its_record_is_a_type_error():
    with pytest.raises(TypeError, match="contact_ke and contact="):
        cloth_grid(2, 2, 0.1, 0.1).build(contact=Contact(), contact_ke=1.0)
    with pytest.raises(TypeError, match="takes a Numerics"):
        cloth_grid(2, 2, 0.1, 0.1).build(numerics=Contact())


def test_records_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Contact().ke = 1.0  # type: ignore[misc]
