"""The build tests' local Compute API: one fake per test, over real HTTP, stopped after it."""

from __future__ import annotations

import pytest

from tests.support.image_compute_fake import PROJECT, ZONE, FakeImageCompute


@pytest.fixture
def fake():
    compute = FakeImageCompute(PROJECT, ZONE)
    yield compute
    compute.stop()
