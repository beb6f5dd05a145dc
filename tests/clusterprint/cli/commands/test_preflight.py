"""clusterprint preflight as a process: a real credentials file, real HTTP to one local fake
of Service Usage, Resource Manager and Compute, and the exact requests it sends.

Each test starts from a project that is ready for the blueprint and takes one thing away:
the line that names it, with its fix, and the exit status are what a user sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import quote

import pytest

from clusterprint.blueprint.validate import load_checked
from clusterprint.build import compute, project_apis
from clusterprint.facts import prerequisites
from clusterprint.render.images import needed_images
from tests.support.paths import ROOT, blueprint_path
from tests.support.plans import planned_types
from tests.support.preflight_fake import FakeProject

PROJECT = "my-project"  # the reference blueprints' project
CPU_SMALL, A3MEGA, A4 = (blueprint_path(n) for n in ("cpu-small", "a3mega", "a4"))
ZONES = {"cpu-small": "us-central1-c", "a3mega": "us-central1-a", "a4": "us-central1-b"}
#: What each blueprint's VMs are, as machineTypes.get answers in its zone (vCPUs).
VCPUS = {"cpu-small": {"n2-standard-2": 2, "e2-standard-2": 2, "n2-standard-4": 4},
         "a3mega": {"c2-standard-8": 8, "n2-standard-4": 4, "a3-megagpu-8g": 208},
         "a4": {"c2-standard-8": 8, "n2-standard-4": 4, "a4-highgpu-8g": 224}}
#: Quota enough for each blueprint, in us-central1: (limit, usage).
QUOTAS = {
    # spot nodes: no preemptible vCPU quota granted, so the regular N2_CPUS counts
    "cpu-small": {"N2_CPUS": (24, 0), "CPUS": (24, 0), "PREEMPTIBLE_CPUS": (0, 0),
                  "SSD_TOTAL_GB": (2048, 0)},
    "a3mega": {"C2_CPUS": (24, 0), "N2_CPUS": (24, 0), "SSD_TOTAL_GB": (8192, 0)},
    "a4": {"C2_CPUS": (24, 0), "N2_CPUS": (24, 0), "SSD_TOTAL_GB": (1024, 0),
           "HYPERDISK_BALANCED_TOTAL_GB": (4096, 0), "PREEMPTIBLE_NVIDIA_B200_GPUS": (64, 0)},
}
RESERVATIONS = {
    "a3mega": {"a3mega-res": {"status": "READY", "specificReservation": {
        "count": 16, "inUseCount": 0,
        "instanceProperties": {"machineType": "a3-megagpu-8g"}}}},
    "a4": {"a4-res": {"status": "READY", "specificReservation": {
        "count": 4, "inUseCount": 0, "instanceProperties": {"machineType": "a4-highgpu-8g"}}}},
}


def ready_project(name: str) -> FakeProject:
    """A project with everything blueprint ``name`` needs; its clusterprint images missing
    (``pulumi up`` builds them), their base images public."""
    fake = FakeProject(PROJECT, ZONES[name])
    types = planned_types(name)
    fake.enabled = set(prerequisites.required_apis(types))
    fake.held = set(prerequisites.deployer_permissions(types))
    fake.quotas = {"us-central1": dict(QUOTAS[name])}
    fake.project_quotas = {"GPUS_ALL_REGIONS": (128, 0), "CPUS_ALL_REGIONS": (32, 0)}
    fake.machine_types = {(ZONES[name], m): n for m, n in VCPUS[name].items()}
    fake.reservations = {(PROJECT, ZONES[name], r): dict(body)
                         for r, body in RESERVATIONS.get(name, {}).items()}
    fake.other_images = {(i.base.project, i.base.name)
                         for i in needed_images(load_checked(blueprint_path(name)))}
    return fake


@pytest.fixture
def project(request, tmp_path):
    """The ready project of the blueprint the test names (indirect; cpu-small by default)."""
    fake = ready_project(getattr(request, "param", "cpu-small"))
    fake.folder = tmp_path
    yield fake
    fake.stop()


def preflight(fake: FakeProject, *argv: str) -> subprocess.CompletedProcess:
    """``clusterprint preflight ARGV`` as a process, its credentials the fake's."""
    env = {**os.environ, "NO_GCE_CHECK": "True", "CLOUDSDK_CONFIG": str(fake.folder),
           "GOOGLE_APPLICATION_CREDENTIALS": str(fake.credentials_file(fake.folder)),
           compute.API_VARIABLE: fake.url,
           project_apis.SERVICE_USAGE_VARIABLE: fake.base("serviceusage"),
           project_apis.RESOURCE_MANAGER_VARIABLE: fake.base("cloudresourcemanager")}
    return subprocess.run([sys.executable, "-m", "clusterprint.cli", "preflight", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


def refused(fake: FakeProject, path: str) -> list[str]:
    """The problem lines of a run that must exit 1."""
    result = preflight(fake, path)
    assert result.returncode == 1, result.stderr
    return result.stdout.splitlines()


def test_a_ready_project_passes_with_exactly_these_read_only_requests(project):
    result = preflight(project, CPU_SMALL)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr.splitlines()[-1] == (
        f"{CPU_SMALL}: ok: project my-project is ready for pulumi up")
    apis = prerequisites.required_apis(planned_types("cpu-small"))
    names = "&".join(f"names={quote(f'projects/{PROJECT}/services/{api}', safe='')}"
                     for api in apis)
    (image,) = needed_images(load_checked(CPU_SMALL))
    assert project.requests() == [
        "GET /cloudresourcemanager/v1/projects/my-project",
        f"GET /serviceusage/v1/projects/my-project/services:batchGet?{names}",
        "POST /cloudresourcemanager/v1/projects/my-project:testIamPermissions",
        "GET /compute/v1/projects/my-project/zones/us-central1-c/machineTypes/e2-standard-2",
        "GET /compute/v1/projects/my-project/zones/us-central1-c/machineTypes/n2-standard-2",
        "GET /compute/v1/projects/my-project/zones/us-central1-c/machineTypes/n2-standard-4",
        "GET /compute/v1/projects/my-project/regions/us-central1",
        "GET /compute/v1/projects/my-project",  # CPUS_ALL_REGIONS
        f"GET /compute/v1/projects/my-project/global/images/{image.name}",
        f"GET /compute/v1/projects/ubuntu-os-cloud/global/images/{image.base.name}",
    ]
    (asked,) = [c.body for c in project.calls if c.method == "POST"]
    assert asked == {"permissions": sorted(prerequisites.deployer_permissions(
        planned_types("cpu-small")))}


def test_every_problem_is_its_own_line_with_its_fix_in_one_run(project):
    project.enabled -= {"file.googleapis.com", "iap.googleapis.com"}
    project.held -= {"file.instances.create"}
    project.quotas["us-central1"]["N2_CPUS"] = (24, 20)
    result = preflight(project, CPU_SMALL)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{CPU_SMALL}: error: api: file.googleapis.com: not enabled in project my-project "
        "(fix: gcloud services enable file.googleapis.com --project my-project)",
        f"{CPU_SMALL}: error: api: iap.googleapis.com: not enabled in project my-project "
        "(fix: gcloud services enable iap.googleapis.com --project my-project)",
        f"{CPU_SMALL}: error: permission: roles/file.editor: the deployer lacks "
        "file.instances.create (fix: gcloud projects add-iam-policy-binding my-project "
        # the credentials are a service account's: the fix grants it, by its address
        "--member=serviceAccount:cli@my-project.iam.gserviceaccount.com "
        "--role=roles/file.editor)",
        # the controller's 2 vCPUs and two spot nodes' 8, with no preemptible quota granted
        f"{CPU_SMALL}: error: quota: N2_CPUS: the plan needs 10 in us-central1, 4 of 24 are "
        "free (VM cpu-small-controller-vm, nodeset cpu) (fix: request more N2_CPUS in "
        "us-central1: https://console.cloud.google.com/iam-admin/quotas?project=my-project)",
    ]
    assert result.stderr.splitlines()[-1] == "4 errors"


def test_quota_for_the_kept_nodes_but_not_every_elastic_one_is_a_warning(project):
    project.quotas["us-central1"]["N2_CPUS"] = (12, 0)  # 10 at once, 18 with 4 nodes up
    result = preflight(project, CPU_SMALL)
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        f"{CPU_SMALL}: warning: quota: N2_CPUS: every elastic node up needs 18 in "
        "us-central1, 12 are free (VM cpu-small-controller-vm, nodeset cpu): nodes above that "
        "fail to start (fix: request more N2_CPUS in us-central1: "
        "https://console.cloud.google.com/iam-admin/quotas?project=my-project)"]
    assert result.stderr.splitlines()[-2:] == [
        f"{CPU_SMALL}: ok: project my-project is ready for pulumi up", "1 warning"]


def test_a_metric_the_region_does_not_list_is_a_warning_that_it_cannot_be_checked(project):
    del project.quotas["us-central1"]["SSD_TOTAL_GB"]
    # boot disks of 50 + 50 + 2 x 200 GB and the controller's 50 GB state disk, and two
    # more nodes' 200 GB each with every elastic node up
    result = preflight(project, CPU_SMALL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{CPU_SMALL}: warning: quota: SSD_TOTAL_GB: project my-project lists no quota "
        "SSD_TOTAL_GB in us-central1, so the plan's 550 at once, 950 with every elastic node "
        "up (VM cpu-small-controller-vm, VM "
        "cpu-small-login-0, nodeset cpu, disk cpu-small-controller-state) cannot be checked "
        "(fix: look it up on https://console.cloud.google.com/iam-admin/quotas?"
        "project=my-project)"]


@pytest.mark.parametrize("project", ["a4"], indirect=True)
def test_gpus_count_against_the_projects_quota_on_all_regions_too(project):
    project.project_quotas["GPUS_ALL_REGIONS"] = (0, 0)  # a new project's
    assert refused(project, A4) == [
        f"{A4}: error: quota: GPUS_ALL_REGIONS: the plan needs 16 in all regions, 0 of 0 are "
        "free (nodeset a4spot) (fix: request more GPUS_ALL_REGIONS in all regions: "
        "https://console.cloud.google.com/iam-admin/quotas?project=my-project)"]
    assert "GET /compute/v1/projects/my-project" in project.requests()


def test_vcpus_count_against_the_projects_quota_on_all_regions_too(project):
    # a cluster without GPUs reads the project's quotas too, for this one
    project.project_quotas["CPUS_ALL_REGIONS"] = (16, 8)  # 8 in use in other regions
    assert refused(project, CPU_SMALL) == [
        f"{CPU_SMALL}: error: quota: CPUS_ALL_REGIONS: the plan needs 12 in all regions, 8 of "
        "16 are free (VM cpu-small-controller-vm, VM cpu-small-login-0, nodeset cpu) (fix: "
        "request more CPUS_ALL_REGIONS in all regions: "
        "https://console.cloud.google.com/iam-admin/quotas?project=my-project)"]


def test_a_machine_type_the_zone_does_not_offer_is_named(project):
    del project.machine_types[("us-central1-c", "e2-standard-2")]
    assert refused(project, CPU_SMALL) == [
        f"{CPU_SMALL}: error: machine-type: e2-standard-2: zone us-central1-c does not offer "
        "it (fix: choose a zone that does: gcloud compute machine-types list "
        "--filter=name=e2-standard-2 --project my-project)"]


@pytest.mark.parametrize("project", ["a3mega"], indirect=True)
def test_a_reserved_gpu_nodeset_takes_no_gpu_quota_and_passes(project):
    result = preflight(project, A3MEGA)
    assert (result.returncode, result.stdout) == (0, "")
    assert ("GET /compute/v1/projects/my-project/zones/us-central1-a/reservations/a3mega-res"
            in project.requests())


@pytest.mark.parametrize("project", ["a3mega"], indirect=True)
def test_a_missing_reservation_is_named_with_the_nodeset(project):
    project.reservations.clear()
    assert refused(project, A3MEGA) == [
        f"{A3MEGA}: error: reservation: projects/my-project/zones/us-central1-a/reservations/"
        "a3mega-res: no such reservation in us-central1-a (nodeset a3mega) (fix: create it in "
        "us-central1-a, or name one of `gcloud compute reservations list --project "
        "my-project` in slurm.nodesets[].reservation)"]


@pytest.mark.parametrize("project", ["a3mega"], indirect=True)
def test_a_reservation_too_small_of_another_machine_and_dense_gets_a_line_each(project):
    reservation = project.reservations[(PROJECT, "us-central1-a", "a3mega-res")]
    reservation.update(deploymentType="DENSE", specificReservation={
        "count": 16, "inUseCount": 6,
        "instanceProperties": {"machineType": "zones/us-central1-a/machineTypes/a3-highgpu-8g"}})
    result = preflight(project, A3MEGA)
    assert result.returncode == 1
    where = f"{A3MEGA}: error: reservation: projects/my-project/zones/us-central1-a/" \
            "reservations/a3mega-res"
    assert result.stdout.splitlines() == [
        f"{where}: it reserves a3-highgpu-8g, nodeset a3mega is a3-megagpu-8g (fix: set the "
        "nodeset's machine_type to a3-highgpu-8g, or name a reservation of a3-megagpu-8g)",
        f"{where}: 10 of its 16 VMs are free, nodeset a3mega want 16 (fix: lower the "
        "nodesets' count to 10, or grow it: gcloud compute reservations update a3mega-res "
        "--zone us-central1-a --vm-count 22 --project my-project)",
        f"{where}: it is dense: its VMs must be reservation-bound, nodeset a3mega is not "
        "(fix: set reservation_bound: true on nodeset a3mega)",
    ]


@pytest.mark.parametrize("project", ["a4"], indirect=True)
def test_spot_gpus_count_against_the_preemptible_gpu_quota(project):
    project.quotas["us-central1"]["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (8, 0)
    result = preflight(project, A4)
    assert result.returncode == 1
    # two spot a4-highgpu-8g nodes kept up: 16 B200s; the reserved nodeset takes none
    assert ": error: quota: PREEMPTIBLE_NVIDIA_B200_GPUS: the plan needs 16 in us-central1, " \
           "8 of 8 are free (nodeset a4spot)" in result.stdout


def test_a_base_image_that_is_gone_fails_the_build_pulumi_up_would_run(project):
    project.other_images.clear()
    (image,) = needed_images(load_checked(CPU_SMALL))
    assert refused(project, CPU_SMALL) == [
        f"{CPU_SMALL}: error: image: {image.base.path}: the base image of {image.name}, which "
        "`pulumi up` would build, is gone (fix: use a clusterprint whose facts/images.py names "
        "a base image that exists)"]


def test_an_obsolete_base_image_is_an_error_and_a_deprecated_one_a_warning(project):
    (image,) = needed_images(load_checked(CPU_SMALL))
    key = (image.base.project, image.base.name)
    project.image_fields[key] = {"deprecated": {"state": "OBSOLETE"}}
    assert refused(project, CPU_SMALL) == [
        f"{CPU_SMALL}: error: image: {image.base.path}: the base image of {image.name}, and "
        "it is OBSOLETE: no VM can be created from it (fix: use a clusterprint whose "
        "facts/images.py names a base image that is current)"]
    project.image_fields[key] = {"deprecated": {"state": "DEPRECATED", "replacement": "new"}}
    result = preflight(project, CPU_SMALL)
    assert result.returncode == 0
    assert "warning: image: " in result.stdout and "DEPRECATED (replaced by new)" in result.stdout


def test_a_pinned_image_family_whose_image_is_not_ready_is_refused(project, tmp_path):
    text = (ROOT / CPU_SMALL).read_text().replace(
        "      machine_type: n2-standard-4\n",
        "      machine_type: n2-standard-4\n"
        "      image: {project: my-images, family: my-slurm}\n")
    (tmp_path / "pinned.yaml").write_text(text)
    project.families.add(("my-images", "my-slurm"))
    project.image_fields[("my-images", "my-slurm")] = {"status": "PENDING"}
    (line,) = refused(project, str(tmp_path / "pinned.yaml"))
    assert line.endswith("nodeset cpu boots it, and its status is PENDING, not READY (fix: "
                         "build it, or fix slurm.nodesets[].image (gcloud compute images list "
                         "--project my-images))")


def test_an_image_already_built_needs_no_base(project):
    (image,) = needed_images(load_checked(CPU_SMALL))
    project.images[image.name] = {"name": image.name, "status": "READY"}
    project.other_images.clear()
    result = preflight(project, CPU_SMALL)
    assert result.returncode == 0
    assert not any("ubuntu-os-cloud" in r for r in project.requests())


def test_a_pinned_image_family_that_does_not_exist_is_named(project, tmp_path):
    text = (ROOT / CPU_SMALL).read_text().replace(
        "      machine_type: n2-standard-4\n",
        "      machine_type: n2-standard-4\n"
        "      image: {project: my-images, family: my-slurm}\n")
    (tmp_path / "pinned.yaml").write_text(text)
    result = preflight(project, str(tmp_path / "pinned.yaml"))
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f"{tmp_path}/pinned.yaml: error: image: projects/my-images/global/images/family/"
        "my-slurm: nodeset cpu boots it, and it does not exist (fix: build it, or fix "
        "slurm.nodesets[].image (gcloud compute images list --project my-images))"]
    project.families.add(("my-images", "my-slurm"))
    assert preflight(project, str(tmp_path / "pinned.yaml")).returncode == 0


def test_a_disabled_compute_api_is_one_line_and_its_checks_are_left_out(project):
    project.enabled.discard("compute.googleapis.com")
    assert refused(project, CPU_SMALL) == [
        f"{CPU_SMALL}: error: api: compute.googleapis.com: not enabled in project my-project "
        "(fix: gcloud services enable compute.googleapis.com --project my-project)"]
    assert not any("/compute/" in r for r in project.requests())


def test_an_api_that_refuses_is_a_problem_with_its_fix_never_a_pass(project):
    project.refusals["GET us-central1"] = (403, "Required 'compute.regions.get' permission")
    project.refusals["POST my-project:testIamPermissions"] = (
        403, "Cloud Resource Manager API has not been used in project my-project before or "
             "it is disabled. SERVICE_DISABLED")
    result = preflight(project, CPU_SMALL)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and "Traceback" not in result.stderr
    assert lines[0].startswith(f"{CPU_SMALL}: error: permission: cloudresourcemanager."
                               "googleapis.com: could not read the deployer's permissions: ")
    assert lines[0].endswith("(fix: gcloud services enable cloudresourcemanager.googleapis.com "
                             "--project my-project)")
    assert lines[1].startswith(f"{CPU_SMALL}: error: quota: us-central1: could not read "
                               "region us-central1's quotas: ")
    assert lines[1].endswith("(fix: grant the deployer a role that may read region "
                             "us-central1's quotas in project my-project (roles/viewer holds "
                             "them all))")


def test_an_answer_that_is_not_json_is_a_problem_line_not_a_traceback(project):
    project.refusals["GET us-central1"] = (200, b"<html>Sign in to the proxy</html>")
    (line,) = refused(project, CPU_SMALL)
    assert line.startswith(f"{CPU_SMALL}: error: quota: us-central1: could not read region "
                           "us-central1's quotas: GET ")
    assert line.endswith("HTTP 200 but not a JSON object: <html>Sign in to the proxy</html> "
                         "(fix: check this machine reaches compute.googleapis.com (a proxy or "
                         "firewall in the way?))")


@pytest.mark.parametrize(("call", "body", "line"), [
    ("GET services:batchGet", b'{"services": ["compute.googleapis.com", {"name": 5}]}',
     "error: api: compute.googleapis.com: not enabled in project my-project"),
    ("POST my-project:testIamPermissions", b'{"permissions": [["compute.disks.create"]]}',
     "error: permission: roles/compute.admin: the deployer lacks compute.disks.create, "),
    ("GET n2-standard-4", b'{"name": "n2-standard-4", "guestCpus": "lots"}',
     "warning: machine-type: n2-standard-4: zone us-central1-c answered no vCPU count for "
     "it, so its vCPU quota is not checked"),
    ("GET " + needed_images(load_checked(CPU_SMALL))[0].base.name,
     b'{"deprecated": "soon", "status": 5}', "error: image: "),
], ids=["apis", "permissions", "machine-type", "image"])
def test_an_answer_of_the_wrong_shape_fails_closed_in_a_line_not_a_traceback(
        project, call, body, line):
    project.refusals[call] = (200, body)
    result = preflight(project, CPU_SMALL)
    assert "Traceback" not in result.stderr
    assert any(problem.startswith(f"{CPU_SMALL}: {line}")
               for problem in result.stdout.splitlines()), result.stdout


def test_json_lists_the_problems_with_the_same_fields(project):
    project.enabled.discard("iap.googleapis.com")
    result = preflight(project, CPU_SMALL, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "file": CPU_SMALL, "project": "my-project", "region": "us-central1",
        "zone": "us-central1-c", "ok": False, "problems": [{
            "severity": "error", "check": "api", "subject": "iap.googleapis.com",
            "message": "not enabled in project my-project",
            "fix": "gcloud services enable iap.googleapis.com --project my-project"}]}


def test_without_credentials_it_exits_2_naming_the_login(tmp_path):
    env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json"),
           "NO_GCE_CHECK": "True", "CLOUDSDK_CONFIG": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "clusterprint.cli", "preflight", CPU_SMALL],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert (result.returncode, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("clusterprint preflight: no Google credentials (")
    assert line.endswith("); run `gcloud auth application-default login`")


@pytest.mark.parametrize(("refusal", "sent"), [("HTTP 401", 3), ("no token", 0)])
def test_refused_credentials_are_one_line_saying_how_to_log_in_again(project, refusal, sent):
    if refusal == "HTTP 401":  # every API refuses the token
        project.api_refusals = {api: (401, "Request had invalid authentication credentials.")
                           for api in ("serviceusage", "cloudresourcemanager", "compute")}
    else:  # the token endpoint refuses the key: no call goes out
        project.token_refused = True
    result = preflight(project, CPU_SMALL, "--json")
    assert (result.returncode, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("clusterprint preflight: the Google credentials were refused (")
    assert line.endswith("); run `gcloud auth application-default login`")
    # the first call only: google-auth itself asks it twice more with a new token on a 401
    assert project.requests() == ["GET /cloudresourcemanager/v1/projects/my-project"] * sent


def test_a_project_that_is_not_there_or_not_visible_is_one_line_not_a_cascade(project):
    # Compute answers 404 of it, which reads as "zone does not offer" a machine type, and
    # the others 403, which reads as permissions missing: it is asked of Resource Manager
    # first, which answers 403 alike for a project missing and one not visible
    project.exists = False
    result = preflight(project, CPU_SMALL)
    assert (result.returncode, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("clusterprint preflight: project my-project does not exist or these "
                           "credentials cannot see it (GET ")
    assert line.endswith(": HTTP 403: The caller does not have permission); check the project "
                         "id (--project, or `project` in the blueprint), or have these "
                         "credentials granted a role on it with resourcemanager.projects.get "
                         "(roles/browser is the least)")
    assert project.requests() == ["GET /cloudresourcemanager/v1/projects/my-project"]


def test_a_disabled_resource_manager_api_is_its_api_line_not_a_missing_project(project):
    project.enabled.discard("cloudresourcemanager.googleapis.com")
    project.api_refusals["cloudresourcemanager"] = (
        403, "Cloud Resource Manager API has not been used in project my-project before or it "
             "is disabled. SERVICE_DISABLED")
    assert refused(project, CPU_SMALL) == [
        f"{CPU_SMALL}: error: api: cloudresourcemanager.googleapis.com: not enabled in project "
        "my-project (fix: gcloud services enable cloudresourcemanager.googleapis.com --project "
        "my-project)"]


def test_an_invalid_blueprint_exits_1_with_validates_lines_and_asks_nothing(project, tmp_path):
    (tmp_path / "bad.yaml").write_text((ROOT / CPU_SMALL).read_text().replace(
        "zone: us-central1-c", "zone: europe-west4-a"))
    result = preflight(project, str(tmp_path / "bad.yaml"))
    assert result.returncode == 1
    assert ": error: zone:" in result.stderr
    assert project.requests() == []


def test_an_unreadable_file_is_a_usage_error(project):
    assert preflight(project, "no/such.yaml").returncode == 2
