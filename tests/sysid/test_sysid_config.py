"""`FitConfig`: frozen, grouped in option records, with flat keywords and read-only flat attributes."""

import dataclasses

import pytest

from gradsim_jax.sysid.config import (FIT_SHORTHANDS, AdamOptions, CheckpointOptions, FitConfig, FrameOptions,
                                      check_config)


def test_flat_keywords_fill_the_records():
    config = FitConfig(free=("mass",), iterations=7, learning_rate=0.2, horizon=4, checkpoint_dir="out")
    assert config.adam == AdamOptions(iterations=7, learning_rate=0.2)
    assert config.frames == FrameOptions(horizon=4)
    assert config.checkpoints == CheckpointOptions(dir="out")
    assert (config.iterations, config.learning_rate, config.horizon, config.checkpoint_dir) == (7, 0.2, 4, "out")
    assert config == FitConfig(free=("mass",), adam=AdamOptions(iterations=7, learning_rate=0.2),
                               frames=FrameOptions(horizon=4), checkpoints=CheckpointOptions(dir="out"))
    check_config(config)


def test_every_flat_name_reads_its_record_field():
    config = FitConfig(free=("mass",))
    for flat, (record, field) in FIT_SHORTHANDS.items():
        assert getattr(config, flat) == getattr(getattr(config, record), field), flat


def test_frozen_and_replaced_not_changed():
    config = FitConfig(free=("mass",), iterations=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.horizon = 3  # type: ignore[misc]
    shorter = dataclasses.replace(config, horizon=3, edge_model="auto")
    assert (shorter.horizon, shorter.edge_model, shorter.iterations) == (3, "auto", 7)
    assert config.horizon is None and config.edge_model == "fixed"


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'iteration'"):
        FitConfig(free=("mass",), iteration=3)
