"""The demo tables (`scenes.catalog`) hold named records that still unpack in their old order."""

from gradsim_jax.scenes import catalog


def test_every_table_entry_is_a_named_record():
    for table in (catalog.RIGID_DEMOS, catalog.CONTACT_DEMOS, catalog.FEM_DEMOS):
        for name, entry in table.items():
            assert isinstance(entry, catalog.DemoEntry), name
            help_, description, estimate, defaults = entry
            assert (entry.help, entry.description, entry.estimate, entry.defaults) == (help_, description, estimate,
                                                                                       defaults)
            assert isinstance(entry.defaults, dict) and "iterations" in entry.defaults
    for name, entry in catalog.ODE_DEMOS.items():
        assert isinstance(entry, catalog.OdeDemoEntry) and entry[4] is entry.start, name
    for name, entry in catalog.CONTROL_DEMOS.items():
        assert isinstance(entry, catalog.ControlDemoEntry) and entry.frames > 0 and entry.iterations > 0, name
    assert catalog.ODE_DEMOS["bounce"].start["gravity"] == -10.0
    assert catalog.FEM_DEMOS["fem-mass"].estimate is None


def test_the_fit_config_of_a_demo_takes_its_defaults():
    entry = catalog.RIGID_DEMOS["rigid-mass"]
    config = catalog.demo_fit_config(("body_mass",), entry.defaults, progress=False)
    assert config.iterations == entry.defaults["iterations"] and config.polish == entry.defaults["polish"]
    assert config.loss == "rgba" and not config.progress
