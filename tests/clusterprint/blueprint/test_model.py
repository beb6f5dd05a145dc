"""The model's defaults are the contract's: what a first cluster gets without asking."""

import pytest
from pydantic import ValidationError

from clusterprint.blueprint.model import Blueprint
from tests.support.blueprint_texts import MINIMAL, apply_overrides


def build(**overrides):
    """The minimal blueprint, overridden, as a model."""
    return Blueprint.model_validate(apply_overrides(MINIMAL, overrides))


def test_contract_defaults():
    bp = build()
    assert bp.orchestrator == "self-managed"
    net = bp.network
    assert (net.subnet_cidr, net.gpu_networks, net.nat) == ("10.0.0.0/20", "auto", True)
    assert net.ssh_source_ranges == ["35.235.240.0/20"]
    assert net.private_service_access.effective_prefix_length == 20
    home = bp.storage.home
    assert (home.filestore.tier, home.filestore.capacity_gib, home.lustre) == ("ZONAL", 1024,
                                                                               None)
    assert (bp.storage.protect, bp.storage.lustre, bp.storage.buckets) == (True, [], [])
    assert (bp.slurm.controller.machine_type, bp.slurm.controller.disk_size_gb) == (
        "c2-standard-8", 100)
    assert (bp.slurm.login.count, bp.slurm.login.machine_type) == (1, "n2-standard-4")
    hc = bp.slurm.health_checks
    assert (hc.gpu, hc.interval_s, hc.on_failure) == ("quick", 300, "drain")
    assert hc.max_remediation_share == 0.1
    assert bp.recipes == []
    assert (bp.observability.tensorboard, bp.observability.dashboard) == (False, False)


def test_mtu_default_is_the_lowest_family_recommendation():
    assert build().mtu == 8896
    mixed = build(**{"slurm.nodesets[0].machine_type": "a4-highgpu-8g",
                     "slurm.nodesets[1]": {"name": "mega", "machine_type": "a3-megagpu-8g",
                                           "count": 1}})
    assert mixed.mtu == 8244
    assert build(**{"network.mtu": 1500}).mtu == 1500


def test_explicit_psa_range_fixes_the_prefix_length():
    bp = build(**{"network.private_service_access.range": "10.200.0.0/22"})
    assert bp.network.private_service_access.effective_prefix_length == 22


def test_mounts_default_from_names():
    bp = build(**{"storage.lustre[0]": {"name": "scratch", "filesystem": "s",
                                        "capacity_gib": 18000},
                  "storage.buckets[0]": {"bucket": "ckpts"}})
    assert bp.mount_of(bp.storage.lustre[0]) == "/lustre/scratch"
    assert bp.storage.buckets[0].mount_path == "/gcs/ckpts"
    assert bp.storage.lustre[0].performance_tier == 500
    home = build(**{"storage.home": {"lustre": "scratch"},
                    "storage.lustre[0]": {"name": "scratch", "filesystem": "s",
                                          "capacity_gib": 18000}})
    assert home.mount_of(home.storage.lustre[0]) == "/home"
    assert not home.storage.home.uses_filestore


@pytest.mark.parametrize("share", [0.01, 0.5, 1.0, 1])
def test_a_remediation_share_is_a_part_of_a_nodeset(share):
    assert build(**{"slurm.health_checks": {"max_remediation_share": share}})


@pytest.mark.parametrize("share", [0, 0.0, -0.1, 1.01, 2])
def test_no_share_remediates_nothing_or_more_than_the_whole_nodeset(share):
    with pytest.raises(ValidationError, match="max_remediation_share"):
        build(**{"slurm.health_checks": {"max_remediation_share": share}})
