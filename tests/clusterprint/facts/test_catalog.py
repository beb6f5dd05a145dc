"""The catalog's tables match reference/gcp-facts.md, number for number."""

import re

import pytest

from clusterprint.blueprint.model import ZONE_PATTERN
from clusterprint.blueprint.validate import load_checked
from clusterprint.facts import catalog, machines, zones
from tests.support.paths import ROOT


@pytest.mark.parametrize(("tier", "minimum", "step", "threshold", "step_above", "maximum"), [
    (1000, 9_000, 9_000, 1_530_000, 72_000, 10_008_000),
    (500, 18_000, 18_000, 3_060_000, 144_000, 20_016_000),
    (250, 36_000, 36_000, 6_120_000, 288_000, 40_032_000),
    (125, 72_000, 72_000, None, None, 12_240_000),
])
def test_lustre_tiers(tier, minimum, step, threshold, step_above, maximum):
    t = catalog.LUSTRE_TIERS[tier]
    assert (t.minimum, t.step, t.threshold, t.step_above, t.maximum) == (
        minimum, step, threshold, step_above, maximum)
    assert any(b.allows(minimum) for b in t.bands())
    assert any(b.allows(maximum) for b in t.bands())


def test_lustre_above_threshold_steps_are_multiples_of_the_large_step():
    bands = catalog.LUSTRE_TIERS[500].bands()

    def allowed(capacity):
        return any(b.allows(capacity) for b in bands)

    assert allowed(3_060_000) and allowed(3_168_000) and allowed(20_016_000 - 144_000)
    assert not allowed(3_078_000) and not allowed(3_204_000)


@pytest.mark.parametrize(("tier", "bands"), [
    ("ZONAL", [(1024, 9984, 256), (10240, 102400, 2560)]),
    ("REGIONAL", [(1024, 9984, 256), (10240, 102400, 2560)]),
    ("ENTERPRISE", [(1024, 10240, 256)]),
    ("HIGH_SCALE_SSD", [(10240, 102400, 2560)]),
    ("BASIC_HDD", [(1024, 65433, 1)]),
    ("BASIC_SSD", [(2560, 65433, 1)]),
])
def test_filestore_tiers(tier, bands):
    assert [(b.minimum, b.maximum, b.step) for b in catalog.FILESTORE_TIERS[tier]] == bands


def test_vpc_mtu_range():
    assert (catalog.MTU_MIN, catalog.MTU_MAX) == (1300, 8896)


@pytest.mark.parametrize(("machine", "gpus", "nics", "networking", "mtu", "disk", "managed"), [
    ("a3-highgpu-8g", 8, 1 + 4, "tcpx", 8244, "pd-balanced", False),
    ("a3-megagpu-8g", 8, 1 + 8, "tcpxo", 8244, "pd-balanced", True),
    ("a3-ultragpu-8g", 8, 2 + 8, "rdma", 8896, "hyperdisk-balanced", True),
    ("a4-highgpu-8g", 8, 2 + 8, "rdma", 8896, "hyperdisk-balanced", True),
    ("a4x-highgpu-4g", 4, 2 + 4, "rdma", 8896, "hyperdisk-balanced", True),
    ("a3-edgegpu-8g", 8, 1 + 4, "tcpx", 8244, "pd-balanced", False),
    ("a3-highgpu-4g", 4, 1, "none", None, "pd-balanced", False),
    ("a2-highgpu-8g", 8, 1, "none", None, "pd-balanced", False),
    ("a2-megagpu-16g", 16, 1, "none", None, "pd-balanced", False),
    ("a2-ultragpu-1g", 1, 1, "none", None, "pd-balanced", False),
    ("g2-standard-32", 1, 1, "none", None, "pd-balanced", False),
    ("g2-standard-48", 4, 1, "none", None, "pd-balanced", False),
])
def test_gpu_machines(machine, gpus, nics, networking, mtu, disk, managed):
    f = machines.gpu_family(machine)
    assert (f.gpus, f.system_nics + f.gpu_nics, f.networking, f.recommended_mtu,
            f.boot_disk_type, f.managed) == (gpus, nics, networking, mtu, disk, managed)


def test_cpu_machines_have_no_family():
    assert machines.gpu_family("n2-standard-4") is None
    assert machines.gpu_count("n2-standard-4") == 0
    assert machines.boot_disk_type("n2-standard-4") == "pd-balanced"


def test_capacity_band_nearest_values():
    band = catalog.CapacityBand(18_000, 3_060_000, 18_000)
    assert band.nearest(20_000) == [18_000, 36_000]
    assert band.nearest(36_000) == [36_000]
    assert band.nearest(1) == [18_000]
    assert band.nearest(9_999_999) == [3_060_000]



def test_only_a4x_is_arm64():
    assert [m for m, f in machines.GPU_MACHINES.items() if f.arch == "arm64"] == ["a4x-highgpu-4g"]


def test_families_without_gpu_networks_do_not_change_the_default_mtu():
    assert machines.recommended_mtu(["a2-highgpu-8g", "g2-standard-96"]) == catalog.MTU_DEFAULT
    assert machines.recommended_mtu(["g2-standard-4", "a3-edgegpu-8g"]) == 8244


@pytest.mark.parametrize(("machine_type", "known"), [
    ("n2-standard-4", True), ("c4a-highcpu-16", True), ("e2-medium", True),
    ("n2-custom-8-32768", True), ("custom-4-16384", True), ("m2-hypermem-416", True),
    ("n2-standrd-4", False), ("a2-highgpu-3g", False), ("q9-standard-4", False),
])
def test_machine_known(machine_type, known):
    assert machines.machine_known(machine_type) is known


def test_private_service_access_blocks_per_producer():
    assert catalog.FILESTORE_PSA_PREFIX == {
        "BASIC_HDD": 29, "BASIC_SSD": 29, "ZONAL": 26, "REGIONAL": 26, "ENTERPRISE": 26,
        "HIGH_SCALE_SSD": 24}
    assert set(catalog.FILESTORE_PSA_PREFIX) == set(catalog.FILESTORE_TIERS)
    assert catalog.LUSTRE_PSA_PREFIX == 23


def test_bundled_local_ssds():
    assert machines.bundled_local_ssds("a3-megagpu-8g") == 16
    assert machines.bundled_local_ssds("a4-highgpu-8g") == 32
    assert machines.bundled_local_ssds("g2-standard-8") == machines.bundled_local_ssds(
        "n2-standard-4") == 0


def test_machine_zones_are_zone_names_each_listed_once():
    tables = {**{f.machine_type: f.zones for f in machines.MACHINE_FAMILIES if f.zones},
              **zones.CPU_SERIES_ZONES}
    for key, listed in tables.items():
        assert listed and all(re.fullmatch(ZONE_PATTERN, z) for z in listed), key
        assert len(set(listed)) == len(listed), key


@pytest.mark.parametrize("path", sorted((ROOT / "blueprints").glob("*.yaml")), ids=lambda p: p.name)
def test_every_reference_blueprint_zone_holds_its_machine_types(path):
    """The reference blueprints and the zone table come from different sources; they agree."""
    blueprint = load_checked(str(path))
    for nodeset in blueprint.slurm.nodesets:
        assert blueprint.zone in machines.machine_zones(nodeset.machine_type), nodeset.name


@pytest.mark.parametrize(("machine_type", "zone", "there"), [
    ("a3-megagpu-8g", "us-central1-a", True),
    ("a3-megagpu-8g", "us-central1-f", False),
    ("a3-highgpu-4g", "europe-west8-c", True),   # the smaller A3 High shapes only
    ("a3-highgpu-8g", "europe-west8-c", False),
    ("a3-ultragpu-8g", "europe-west1-b", True),
    ("a4-highgpu-8g", "us-west3-c", True),
    ("n2-highmem-64", "africa-south1-b", True),  # CPU types by series
    ("c2-standard-8", "africa-south1-b", False),
])
def test_machine_zones(machine_type, zone, there):
    assert (zone in machines.machine_zones(machine_type)) is there


def test_machine_types_without_a_zone_table_have_no_zones():
    assert machines.machine_zones("a4x-highgpu-4g") == ()
    assert machines.machine_zones("g2-standard-4") == ()
    assert machines.machine_zones("a3-highgpu-3g") == ()


@pytest.mark.parametrize(("machine_type", "cpu", "gpu"), [
    ("n2-standard-4", "N2_CPUS", None), ("c2-standard-8", "C2_CPUS", None),
    ("e2-standard-2", "CPUS", None), ("n1-highmem-8", "CPUS", None),
    ("custom-8-32768", "CPUS", None),
    ("a2-highgpu-8g", "A2_CPUS", "NVIDIA_A100_GPUS"),
    ("a2-ultragpu-4g", "A2_CPUS", "NVIDIA_A100_80GB_GPUS"),
    ("a3-highgpu-8g", None, "NVIDIA_H100_GPUS"), ("a3-megagpu-8g", None, "NVIDIA_H100_MEGA_GPUS"),
    ("a3-ultragpu-8g", None, "NVIDIA_H200_GPUS"), ("a4-highgpu-8g", None, "NVIDIA_B200_GPUS"),
    ("a4x-highgpu-4g", None, "NVIDIA_GB200_GPUS"), ("g2-standard-24", None, "NVIDIA_L4_GPUS"),
])
def test_quota_metrics(machine_type, cpu, gpu):
    assert machines.quota_metrics(machine_type) == (cpu, gpu)


def test_spot_vms_first_draw_on_one_preemptible_vcpu_quota_and_their_gpus_own():
    assert machines.preemptible_quota("N2_CPUS") == "PREEMPTIBLE_CPUS"
    assert machines.preemptible_quota("NVIDIA_H200_GPUS") == "PREEMPTIBLE_NVIDIA_H200_GPUS"


def test_every_disk_type_a_blueprint_takes_has_a_quota_metric():
    from typing import get_args

    from clusterprint.blueprint.model import BootDisk

    (types, _) = get_args(BootDisk.model_fields["type"].annotation)
    assert set(get_args(types)) == catalog.DISK_QUOTA_METRICS.keys()
