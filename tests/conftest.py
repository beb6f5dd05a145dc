"""Fixtures shared across the test folders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.metadata_fake import FakeMetadata


@pytest.fixture
def fake_metadata() -> Iterator[FakeMetadata]:
    """A fake metadata server on 127.0.0.1 that waits for changes; stopped after the test."""
    fake = FakeMetadata()
    yield fake
    fake.stop()
