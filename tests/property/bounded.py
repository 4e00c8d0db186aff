"""Hypothesis settings shared by the property tests: reproducible and bounded, so CI stays fast."""

import os

from hypothesis import HealthCheck, settings

#: The suite runs 0.3 x the examples written at each test (the 10-minute CI budget);
#: GRADSIM_PROPERTY_SCALE=20 runs twenty times them (a deeper search than CI's).
SCALE = float(os.environ.get("GRADSIM_PROPERTY_SCALE", "0.3"))


def bounded(examples: int):
    """Derandomized settings with `examples` x SCALE examples, no deadline and no example database."""
    return settings(max_examples=max(1, round(examples * SCALE)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
