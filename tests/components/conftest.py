"""The ``cloud`` fixture: fresh Pulumi mocks per test (tests/support/pulumi_mocks.py)."""

from __future__ import annotations

import pulumi
import pytest

from tests.support.pulumi_mocks import (
    Cloud,
    EngineLog,
    RecordingMocks,
    RecordingMonitor,
    engine_logger,
)


@pytest.fixture
def cloud() -> Cloud:
    """Fresh mocks for one test: nothing recorded by another test leaks in."""
    monitor, log = RecordingMonitor(RecordingMocks()), EngineLog()
    pulumi.runtime.set_mocks(monitor.recording, project="clusterprint", stack="test",
                             preview=False, monitor=monitor, logger=engine_logger(log))
    return Cloud(monitor, log)
