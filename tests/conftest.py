"""The one Hypothesis profile for every test.

No deadline: a shared 2-core machine makes single examples slow now and then, and a deadline would
turn that into a flaky failure that says nothing about the code. Slow or large data generation is
expected for random machines, so those health checks are off. Each test keeps its own max_examples.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "numalign",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("numalign")
