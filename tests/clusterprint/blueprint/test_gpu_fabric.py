"""The GPU fabric: one kind per cluster, and subnets carved for every NIC without overlap."""

import ipaddress
import json

import pytest

from clusterprint.blueprint.gpu_fabric import gpu_networking, gpu_ranges, subnets_needed
from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import load_checked
from tests.support.paths import blueprint_path


def reference(name: str) -> Blueprint:
    return load_checked(blueprint_path(name))


@pytest.mark.parametrize(("name", "kind", "gpu", "gvnic"), [
    ("a3mega", "tcpxo", 8, 0), ("a3ultra", "rdma", 8, 1), ("a4", "rdma", 8, 1),
    ("cpu-small", "none", 0, 0)])
def test_each_reference_gets_its_families_subnets(name, kind, gpu, gvnic):
    bp = reference(name)
    gpu_cidrs, gvnic_cidrs = gpu_ranges(bp)
    assert gpu_networking(bp) == kind
    assert (len(gpu_cidrs), len(gvnic_cidrs)) == (gpu, gvnic)
    assert subnets_needed(bp) == gpu + gvnic
    networks = [ipaddress.IPv4Network(c) for c in gpu_cidrs + gvnic_cidrs]
    assert not any(a.overlaps(b) for i, a in enumerate(networks) for b in networks[:i])
    outer = ipaddress.IPv4Network(bp.network.gpu_subnets_cidr)
    assert all(n.subnet_of(outer) for n in networks)


def test_gpu_networks_none_builds_no_fabric():
    data = reference("a3mega").model_dump(by_alias=True)
    data["network"]["gpu_networks"] = "none"
    bp = Blueprint.model_validate_json(json.dumps(data))
    assert gpu_networking(bp) == "none" and gpu_ranges(bp) == ([], [])


def test_mixed_fabrics_are_refused_to_callers_that_skip_validation():
    data = reference("a4").model_dump(by_alias=True)
    data["slurm"]["nodesets"][1]["machine_type"] = "a3-megagpu-8g"
    with pytest.raises(ValueError, match="mix GPU networking kinds rdma, tcpxo"):
        gpu_networking(Blueprint.model_validate_json(json.dumps(data)))
