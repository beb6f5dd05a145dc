"""The stack's ``after_destroy`` output: what keeps billing after `pulumi destroy`, and that
destroy kills running jobs, for the blueprint the stack was built from."""

from __future__ import annotations

import pytest

from tests.support.paths import BLUEPRINTS, ROOT
from tests.support.plans import plan_of_file

MANAGED = ROOT / "tests" / "components" / "blueprints" / "managed.yaml"


def after_destroy(path) -> list[str]:
    """The output as the program exports it under Pulumi's mocks."""
    return plan_of_file(path).outputs["after_destroy"]


@pytest.mark.parametrize("path", [BLUEPRINTS / "cpu-small.yaml", BLUEPRINTS / "a3mega.yaml",
                                  MANAGED])
def test_every_stack_warns_of_running_jobs_first_and_names_what_it_leaves(path):
    lines = after_destroy(path)
    assert "kills running jobs" in lines[0] and "`squeue`" in lines[0]
    assert "state=drain" in lines[0]
    assert any("images" in line and "clusterprint image build" in line for line in lines)
    assert any("Pulumi's state" in line for line in lines)


def test_a_consumed_reservation_bills_until_released():
    (line,) = [x for x in after_destroy(BLUEPRINTS / "a3mega.yaml") if "reservation " in x]
    assert "projects/my-project/reservations/a3mega-res (nodeset a3mega)" in line
    assert "not created, by this stack: it bills until it ends or you release it" in line
    assert ("`gcloud compute reservations delete a3mega-res --zone us-central1-a --project "
            "my-project`") in line


def test_a_created_bucket_must_be_emptied_and_an_existing_one_keeps_its_contents():
    created = after_destroy(BLUEPRINTS / "a3mega.yaml")
    assert any('gcloud storage rm --recursive "gs://my-project-a3mega-ckpts/**"' in line
               for line in created)
    existing = after_destroy(MANAGED)
    assert any(line.startswith("bucket gs://my-project-a4-data is not the stack's") and
               "contents" in line and "bill" in line for line in existing)


def test_protection_is_named_only_where_it_is_on():
    assert any("storage.protect is true" in x for x in after_destroy(BLUEPRINTS / "a3mega.yaml"))
    assert not any("storage.protect" in x for x in after_destroy(BLUEPRINTS / "cpu-small.yaml"))
    assert not any("reservation " in x for x in after_destroy(BLUEPRINTS / "cpu-small.yaml"))
