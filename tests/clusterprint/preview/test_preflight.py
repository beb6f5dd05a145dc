"""preflight's reservation and quota checks, in process against the local fake: the cases a
reference blueprint does not reach (a shared reservation, a block, reservation_bound off a
dense reservation, two nodesets on one reservation, a reservation not ready, a granted
preemptible quota, elastic nodes beyond a reservation), and an API down, whose retries'
waits a test records instead of sleeping."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from google.auth.transport.requests import AuthorizedSession
from google.oauth2.credentials import Credentials
from ruamel.yaml import YAML

from clusterprint.blueprint.validate import check_text
from clusterprint.build import compute, project_apis
from clusterprint.build.compute import ComputeError
from clusterprint.cli.commands.preflight import project_apis as clients
from clusterprint.facts import prerequisites
from clusterprint.preview.preflight import (
    CannotRun,
    check_quota,
    check_reservations,
    preflight,
    reservation_owner,
    unreadable,
)
from clusterprint.preview.quota_needs import Need
from tests.support.blueprint_texts import apply_overrides, to_yaml
from tests.support.image_compute_fake import TOKEN
from tests.support.paths import blueprint_path
from tests.support.plans import planned_types, reference_plan
from tests.support.preflight_fake import FakeProject

ZONE = "us-central1-b"  # a4's
RESERVED = {"status": "READY", "specificReservation": {
    "count": 8, "inUseCount": 0, "instanceProperties": {"machineType": "a4-highgpu-8g"}}}


def a4(overrides: dict):
    data = YAML(typ="safe").load(Path(blueprint_path("a4")).read_text())
    checked = check_text("a4.yaml", to_yaml(apply_overrides(data, overrides)))
    assert checked.ok, checked.lines()
    return checked.blueprint


@pytest.fixture
def fake(monkeypatch):
    project = FakeProject("my-project", ZONE)
    monkeypatch.setenv(compute.API_VARIABLE, project.url)
    monkeypatch.setenv(project_apis.SERVICE_USAGE_VARIABLE, project.base("serviceusage"))
    monkeypatch.setenv(project_apis.RESOURCE_MANAGER_VARIABLE,
                       project.base("cloudresourcemanager"))
    yield project
    project.stop()


def apis_of(sleep=time.sleep):
    return clients(AuthorizedSession(Credentials(TOKEN)), "my-project", sleep)


def lines(problems) -> list[str]:
    return [p.line() for p in problems]


def test_a_shared_reservations_block_is_read_from_its_owner_project(fake):
    blueprint = a4({"slurm.nodesets[0].reservation":
                    "projects/other-project/reservations/shared/reservationBlocks/b1"})
    fake.reservations[("other-project", ZONE, "shared")] = dict(RESERVED)
    assert check_reservations(blueprint, apis_of()) == []
    assert fake.requests() == [
        f"GET /compute/v1/projects/other-project/zones/{ZONE}/reservations/shared"]


def test_two_nodesets_on_one_reservation_need_their_counts_together(fake):
    blueprint = a4({"slurm.nodesets[1].provisioning": "reservation",
                    "slurm.nodesets[1].reservation": "a4-res", "slurm.nodesets[1].max_count": 2})
    fake.reservations[("my-project", ZONE, "a4-res")] = {
        **RESERVED, "specificReservation": {**RESERVED["specificReservation"], "count": 5}}
    assert lines(check_reservations(blueprint, apis_of())) == [
        f"error: reservation: projects/my-project/zones/{ZONE}/reservations/a4-res: 5 of its 5 "
        "VMs are free, nodeset a4, nodeset a4spot want 6 (fix: lower the nodesets' count to "
        f"5, or grow it: gcloud compute reservations update a4-res --zone {ZONE} --vm-count 6 "
        "--project my-project)"]
    assert len(fake.requests()) == 1  # one read for both


def test_reservation_bound_off_a_dense_reservation_is_only_a_warning(fake):
    # A calendar-mode reservation takes reservation-bound VMs too, and its Reservation
    # does not say it is one: only a dense one is known to need them.
    fake.reservations[("my-project", ZONE, "a4-res")] = dict(RESERVED)
    assert check_reservations(a4({}), apis_of()) == []
    (problem,) = check_reservations(a4({"slurm.nodesets[0].reservation_bound": True}), apis_of())
    assert (problem.severity, problem.fix) == (
        "warning", "set reservation_bound: false on nodeset a4 unless the reservation came "
        "from a calendar-mode future reservation")
    fake.reservations[("my-project", ZONE, "a4-res")] = {**RESERVED, "deploymentType": "DENSE"}
    assert check_reservations(a4({"slurm.nodesets[0].reservation_bound": True}), apis_of()) == []


def test_elastic_nodes_beyond_the_reservations_free_vms_are_a_warning(fake):
    fake.reservations[("my-project", ZONE, "a4-res")] = dict(RESERVED)
    (problem,) = check_reservations(a4({"slurm.nodesets[0].count": 4,
                                        "slurm.nodesets[0].max_count": 12}), apis_of())
    assert (problem.severity, problem.message) == (
        "warning", "8 of its 8 VMs are free, nodeset a4 grow to 12 at most: nodes above 8 "
                   "fail to start")
    assert problem.fix.endswith("--vm-count 12 --project my-project")


def test_a_reservation_not_ready_says_its_status(fake):
    fake.reservations[("my-project", ZONE, "a4-res")] = {**RESERVED, "status": "CREATING"}
    (problem,) = check_reservations(a4({}), apis_of())
    assert problem.message == "its status is CREATING, not READY"


def test_a_reservation_being_resized_is_only_a_warning(fake):
    # UPDATING: what `gcloud compute reservations update --vm-count` (a fix's) leaves a
    # while; its VMs can still be used
    fake.reservations[("my-project", ZONE, "a4-res")] = {**RESERVED, "status": "UPDATING"}
    (problem,) = check_reservations(a4({}), apis_of())
    assert (problem.severity, problem.message) == ("warning", "its status is UPDATING")


def test_another_projects_reservation_not_shared_with_this_one_is_refused(fake):
    blueprint = a4({"slurm.nodesets[0].reservation": "projects/other-project/reservations/r"})
    fake.reservations[("other-project", ZONE, "r")] = {**RESERVED, "shareSettings": {
        "shareType": "SPECIFIC_PROJECTS",
        "projectMap": {"third-project": {"projectId": "third-project"}}}}
    (problem,) = check_reservations(blueprint, apis_of())
    assert problem.line() == (
        f"error: reservation: projects/other-project/zones/{ZONE}/reservations/r: it is not "
        "shared with project my-project (nodeset a4) (fix: gcloud compute reservations update r "
        f"--zone {ZONE} --add-share-with=my-project --project other-project)")
    fake.reservations[("other-project", ZONE, "r")]["shareSettings"] = {"shareType": "LOCAL"}
    (problem,) = check_reservations(blueprint, apis_of())
    assert problem.message == "it is not shared with project my-project (nodeset a4)"
    fake.reservations[("other-project", ZONE, "r")]["shareSettings"] = {
        "shareType": "SPECIFIC_PROJECTS",
        "projectMap": {"my-project": {"projectId": "my-project"}}}
    assert check_reservations(blueprint, apis_of()) == []
    fake.reservations[("other-project", ZONE, "r")]["shareSettings"]["projectMap"] = {
        "123456789012": {"projectId": "my-project"}}  # by number: its projectId names it
    assert check_reservations(blueprint, apis_of()) == []


def test_a_reservation_made_from_an_instance_template_is_not_refused_for_its_type(fake):
    fake.reservations[("my-project", ZONE, "a4-res")] = {**RESERVED, "specificReservation": {
        "count": "8", "inUseCount": "0",
        "sourceInstanceTemplate": "projects/my-project/global/instanceTemplates/a4-t"}}
    (problem,) = check_reservations(a4({}), apis_of())
    assert (problem.severity, problem.message) == (
        "warning", "it reserves the machine type of instance template projects/my-project/"
                   "global/instanceTemplates/a4-t, which preflight does not read: nodeset a4 "
                   "is a4-highgpu-8g")


def test_a_reservation_answer_of_the_wrong_shape_fails_closed_without_a_crash(fake):
    fake.reservations[("my-project", ZONE, "a4-res")] = {
        "status": "READY", "specificReservation": {"count": "many", "instanceProperties": []}}
    assert [p.message for p in check_reservations(a4({}), apis_of())] == [
        "it reserves no machine type, nodeset a4 is a4-highgpu-8g",
        "0 of its 0 VMs are free, nodeset a4 want 4"]


def test_the_owner_of_a_reservation_path():
    assert reservation_owner("r1", "mine") == ("mine", "r1")
    assert reservation_owner("projects/theirs/reservations/r1/reservationBlocks/b/"
                             "reservationSubBlocks/s", "mine") == ("theirs", "r1")


def test_spot_vms_draw_on_granted_preemptible_quota_and_else_share_the_regular_one(fake):
    needs = [Need("N2_CPUS", None, 4, 4, ("VM login",)),
             Need("N2_CPUS", "PREEMPTIBLE_CPUS", 8, 16, ("nodeset cpu",))]
    fake.quotas = {"us-central1": {"N2_CPUS": (10, 0), "PREEMPTIBLE_CPUS": (0, 0)}}
    (problem,) = check_quota(needs, "us-central1", apis_of())
    assert (problem.subject, problem.message) == (
        "N2_CPUS", "the plan needs 12 in us-central1, 10 of 10 are free (VM login, nodeset cpu)")
    fake.quotas = {"us-central1": {"N2_CPUS": (10, 0), "PREEMPTIBLE_CPUS": (16, 0)}}
    assert check_quota(needs, "us-central1", apis_of()) == []


def test_an_unlimited_quota_passes_and_one_over_its_limit_has_none_free(fake):
    needs = [Need("N2_CPUS", None, 8, 16, ("nodeset cpu",)),
             Need("SSD_TOTAL_GB", None, 100, 100, ("nodeset cpu",))]
    # -1: no limit; usage above the limit (a limit lowered under what runs): none free
    fake.quotas = {"us-central1": {"N2_CPUS": (-1, 50), "SSD_TOTAL_GB": (10, 14)}}
    assert lines(check_quota(needs, "us-central1", apis_of())) == [
        "error: quota: SSD_TOTAL_GB: the plan needs 100 in us-central1, 0 of 10 are free "
        "(nodeset cpu) (fix: request more SSD_TOTAL_GB in us-central1: "
        "https://console.cloud.google.com/iam-admin/quotas?project=my-project)"]


def test_an_unlimited_preemptible_quota_is_granted(fake):
    needs = [Need("N2_CPUS", "PREEMPTIBLE_CPUS", 8, 16, ("nodeset cpu",))]
    fake.quotas = {"us-central1": {"N2_CPUS": (0, 0), "PREEMPTIBLE_CPUS": (-1, 0)}}
    assert check_quota(needs, "us-central1", apis_of()) == []


def test_quota_entries_the_api_should_not_send_cannot_be_checked_but_do_not_crash(fake):
    fake.quotas = {"us-central1": {}}
    fake.refusals["GET us-central1"] = (200, b'{"quotas": ["N2_CPUS", {"limit": 5}, '
                                             b'{"metric": "N2_CPUS", "limit": "lots"}]}')
    (problem,) = check_quota([Need("N2_CPUS", None, 0, 16, ("nodeset cpu",))],
                             "us-central1", apis_of())
    assert (problem.severity, problem.message) == (
        "warning", "project my-project lists no quota N2_CPUS in us-central1, so the plan's 0 "
                   "at once, 16 with every elastic node up (nodeset cpu) cannot be checked")


def test_a_region_that_does_not_exist_is_a_problem(fake):
    (problem,) = check_quota([Need("CPUS", None, 1, 1, ("VM x",))], "us-nowhere1", apis_of())
    assert problem.message == "project my-project has no region us-nowhere1"


@pytest.mark.parametrize(("status", "fix"), [
    (429, "wait a minute, then run preflight again: the API limits how fast a project may "
          "ask it"),
    (503, "run preflight again; if it persists, the API's status page may say why"),
])
def test_a_call_asked_once_that_failed_gets_the_fix_its_status_calls_for(status, fix):
    # testIamPermissions is a POST, asked once: its failure is its own line
    problem = unreadable("permissions", "deployer", "the deployer's permissions",
                         ComputeError(f"POST url: HTTP {status}: no", status), "p",
                         "cloudresourcemanager.googleapis.com")
    assert (problem.message, problem.fix) == (
        f"could not read the deployer's permissions: POST url: HTTP {status}: no", fix)


def test_a_read_throttled_on_every_try_stops_the_run_saying_to_wait(fake):
    """A throttled API answered: it is told to wait, not that it did not answer."""
    types = planned_types("a4")
    fake.enabled = set(prerequisites.required_apis(types))
    fake.held = set(prerequisites.deployer_permissions(types))
    fake.api_refusals["compute"] = (429, "Quota exceeded")
    with pytest.raises(CannotRun) as stopped:
        preflight(a4({}), reference_plan("a4"), apis_of(lambda _: None))
    call = f"GET {fake.url}/projects/my-project/zones/{ZONE}/machineTypes/a4-highgpu-8g"
    assert str(stopped.value) == (
        f"compute.googleapis.com limited this project's requests through 4 tries ({call}: "
        "HTTP 429: Quota exceeded); wait a minute, then run preflight again: the API limits "
        "how fast a project may ask it")


def test_user_credentials_without_a_quota_project_stop_the_run_saying_how_to_set_one(fake):
    """Google's 403 for them reads SERVICE_DISABLED, but enabling the API would not help."""
    fake.api_refusals["cloudresourcemanager"] = (403, (
        "Your application is authenticating by using local Application Default Credentials. "
        "The cloudresourcemanager.googleapis.com API requires a quota project, which is not "
        "set by default. SERVICE_DISABLED"))
    with pytest.raises(CannotRun) as stopped:
        preflight(a4({}), reference_plan("a4"), apis_of())
    assert str(stopped.value).startswith(
        "cloudresourcemanager.googleapis.com needs a quota project for these user credentials")
    assert str(stopped.value).endswith(
        "; run `gcloud auth application-default set-quota-project my-project`")
    assert fake.requests() == ["GET /cloudresourcemanager/v1/projects/my-project"]


def test_an_api_that_does_not_answer_stops_the_run_after_one_calls_retries(fake):
    # every Compute call would wait 2 + 4 + 8 s before its line: minutes for a4's dozen
    types = planned_types("a4")
    fake.enabled = set(prerequisites.required_apis(types))
    fake.held = set(prerequisites.deployer_permissions(types))
    fake.api_refusals["compute"] = (503, "The service is currently unavailable.")
    waits: list[float] = []
    with pytest.raises(CannotRun) as stopped:
        preflight(a4({}), reference_plan("a4"), apis_of(waits.append))
    assert waits == [2.0, 4.0, 8.0]  # one call's, and no other call asked again
    machine_type = f"GET /compute/v1/projects/my-project/zones/{ZONE}/machineTypes/a4-highgpu-8g"
    assert fake.requests()[3:] == [machine_type] * compute.ATTEMPTS
    assert [r.split("?")[0] for r in fake.requests()[:3]] == [
        "GET /cloudresourcemanager/v1/projects/my-project",
        "GET /serviceusage/v1/projects/my-project/services:batchGet",
        "POST /cloudresourcemanager/v1/projects/my-project:testIamPermissions"]
    assert str(stopped.value) == (
        f"compute.googleapis.com failed in 4 tries (GET {fake.url}/projects/my-project/"
        f"zones/{ZONE}/machineTypes/a4-highgpu-8g: HTTP 503: The service is currently "
        "unavailable.); run preflight again in a few minutes; if it persists, check that this "
        "machine reaches compute.googleapis.com and the API's status page")
