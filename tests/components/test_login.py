"""LoginNodes on their own."""

from __future__ import annotations

from clusterprint.components.login import LoginNodes

INSTANCE = "gcp:compute/instance:Instance"
SLURM_CONFIG = '{"slurm.conf": "ClusterName=c1\\n"}'


def login(cloud, count: int) -> list[str]:
    """Declare ``count`` login nodes; return their names."""
    return cloud.run(lambda: LoginNodes(
        "login", cluster="c1", project="p-roject", zone="us-central1-a",
        subnetwork="projects/p-roject/regions/us-central1/subnetworks/s",
        munge_secret="projects/p-roject/secrets/c1-munge-key", startup_script="#!/bin/bash\n",
        slurm_config=SLURM_CONFIG, count=count).instance_names)


def test_login_nodes_are_named_and_private(cloud):
    assert login(cloud, 2) == ["c1-login-0", "c1-login-1"]
    vms = cloud.of_type(INSTANCE)
    assert sorted(vm.inputs["name"] for vm in vms) == ["c1-login-0", "c1-login-1"]
    for vm in vms:
        assert all("accessConfigs" not in nic for nic in vm.inputs["networkInterfaces"])
        assert vm.inputs["metadata"]["clusterprint-role"] == "login"
        assert vm.inputs["metadata"]["clusterprint-munge-secret"] == (
            "projects/p-roject/secrets/c1-munge-key")
        # The Slurm files travel apart from the startup script: a running VM follows them.
        assert vm.inputs["metadata"]["clusterprint-slurm-config"] == SLURM_CONFIG


def test_login_nodes_only_read_the_munge_key(cloud):
    login(cloud, 1)
    roles = {r.inputs["role"] for r in
             cloud.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")}
    assert roles == {"roles/secretmanager.secretAccessor"}
    assert {r.inputs["role"] for r in cloud.of_type("gcp:projects/iAMMember:IAMMember")} == {
        "roles/logging.logWriter", "roles/monitoring.metricWriter"}


def test_no_login_nodes_makes_no_vm(cloud):
    assert login(cloud, 0) == []
    assert not cloud.of_type(INSTANCE)


def test_a_login_node_with_a_tensorboard_gets_its_name_and_vertex_ai_user(cloud):
    tensorboard = "projects/p-roject/locations/us-central1/tensorboards/7"
    cloud.run(lambda: LoginNodes(
        "login", cluster="c1", project="p-roject", zone="us-central1-a",
        subnetwork="projects/p-roject/regions/us-central1/subnetworks/s",
        munge_secret="projects/p-roject/secrets/c1-munge-key", startup_script="#!/bin/bash\n",
        slurm_config=SLURM_CONFIG, tensorboard=tensorboard).instance_names)
    assert cloud.one(INSTANCE).inputs["metadata"]["clusterprint-tensorboard"] == tensorboard
    assert {r.inputs["role"] for r in cloud.of_type("gcp:projects/iAMMember:IAMMember")} == {
        "roles/logging.logWriter", "roles/monitoring.metricWriter", "roles/aiplatform.user"}


def test_a_login_node_without_a_tensorboard_has_neither(cloud):
    login(cloud, 1)
    assert "clusterprint-tensorboard" not in cloud.one(INSTANCE).inputs["metadata"]
