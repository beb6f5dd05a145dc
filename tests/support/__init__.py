"""Helpers the test modules share: fakes of Google's APIs and of a node's tools, the boot
sandbox, local Slurm daemons, Pulumi mocks, blueprint texts and the session's plans. Test
modules import from here, never from each other (tests/test_support_imports.py)."""
