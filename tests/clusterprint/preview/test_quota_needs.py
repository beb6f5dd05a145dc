"""The quota a plan takes: from the planned VMs and disks and each nodeset's counts."""

from __future__ import annotations

from clusterprint.blueprint.validate import load_checked
from clusterprint.preview.quota_needs import Need, Vms, planned_vms, quota_needs
from tests.support.paths import blueprint_path
from tests.support.plans import MANAGED, plan_of_file, reference_plan

VCPUS = {"c2-standard-8": 8, "n2-standard-4": 4, "a4-highgpu-8g": 224}.get


def test_a4_counts_the_single_vms_and_the_spot_gpus_but_not_the_reserved_ones():
    blueprint = load_checked(blueprint_path("a4"))
    needs = {(n.metric, n.preemptible): n for n in
             quota_needs(planned_vms(blueprint, reference_plan("a4")), [], VCPUS)}
    assert needs[("C2_CPUS", None)].count == 8
    assert needs[("N2_CPUS", None)].count == 4
    # a4spot: 2 nodes kept, 8 at most, 8 B200s each; the reserved a4 nodeset takes none
    gpus = needs[("NVIDIA_B200_GPUS", "PREEMPTIBLE_NVIDIA_B200_GPUS")]
    assert (gpus.count, gpus.max_count, gpus.who) == (16, 64, ("nodeset a4spot",))
    # and the project's quota on all GPUs, regular or spot
    assert needs[("GPUS_ALL_REGIONS", None)].count == 16
    # its quota on all vCPUs: the controller's and the login node's, as in the region
    assert needs[("CPUS_ALL_REGIONS", None)].count == 8 + 4
    # A4 takes GPU quota only
    assert all("nodeset" not in " ".join(n.who) for (metric, _), n in needs.items()
               if metric.endswith("CPUS"))
    # the reserved nodes' boot disks still count
    assert "nodeset a4" in needs[("HYPERDISK_BALANCED_TOTAL_GB", None)].who


def test_disk_gb_follow_the_counts_and_unknown_vcpus_count_nothing():
    vms = [Vms("n2-standard-4", 2, 5, False, False, (("pd-ssd", 100),), "nodeset n"),
           Vms("zz-unknown-1", 1, 1, False, False, (), "VM z")]
    assert quota_needs(vms, [("pd-standard", 30, "state")], VCPUS) == [
        Need("CPUS_ALL_REGIONS", None, 8, 20, ("nodeset n",)),
        Need("DISKS_TOTAL_GB", None, 30, 30, ("disk state",)),
        Need("N2_CPUS", None, 8, 20, ("nodeset n",)),
        Need("SSD_TOTAL_GB", None, 200, 500, ("nodeset n",)),
    ]


def test_spot_vcpus_take_the_preemptible_quota_in_the_region_and_the_regular_one_project_wide():
    # no preemptible CPUS_ALL_REGIONS exists: every vCPU outside a reservation counts there
    vms = [Vms("n2-standard-4", 2, 4, True, False, (), "nodeset spot"),
           Vms("c2-standard-8", 1, 1, False, False, (), "VM controller"),
           Vms("n2-standard-4", 3, 3, True, True, (), "nodeset reserved")]
    assert quota_needs(vms, [], VCPUS) == [
        Need("C2_CPUS", None, 8, 8, ("VM controller",)),
        Need("CPUS_ALL_REGIONS", None, 16, 24, ("nodeset spot", "VM controller")),
        Need("N2_CPUS", "PREEMPTIBLE_CPUS", 8, 16, ("nodeset spot",)),
    ]


def test_a_managed_clusters_login_vms_take_quota_though_the_api_creates_them():
    # Cluster Director creates the login VMs in the project from the blueprint's type and
    # count: the plan has no Instance of them, the quota is taken all the same
    blueprint = load_checked(str(MANAGED))
    login = Vms("n2-standard-4", 1, 1, False, False, (), "the login nodes")
    assert login in planned_vms(blueprint, plan_of_file(MANAGED))
    # a self-managed cluster's login VMs are the plan's own Instances, counted once
    a4 = load_checked(blueprint_path("a4"))
    assert [v.who for v in planned_vms(a4, reference_plan("a4")) if "login" in v.who] == [
        "VM a4-login-0"]
