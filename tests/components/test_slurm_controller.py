"""SlurmController on its own: the VM, its roles, its state disk and the munge, JWT and
database secrets without a key."""

from __future__ import annotations

import pytest

from clusterprint.components.slurm_controller import SlurmController
from clusterprint.contract import node_metadata

INSTANCE = "gcp:compute/instance:Instance"
SECRET = "gcp:secretmanager/secret:Secret"
SLURM_CONFIG = '{"slurm.conf": "ClusterName=c1\\n"}'


def controller(cloud, slurm_config: str = SLURM_CONFIG) -> str:
    """Declare a controller; return its munge secret's name."""
    return cloud.run(lambda: SlurmController(
        "ctl", cluster="c1", project="p-roject", zone="us-central1-a",
        subnetwork="projects/p-roject/regions/us-central1/subnetworks/s",
        startup_script="#!/bin/bash\n", slurm_config=slurm_config,
        machine_type="n2-standard-2", disk_size_gb=50,
        tags=["c1"], buckets={"ckpt": "ckpt"}).munge_secret_id)


def test_the_controller_vm_is_named_private_and_in_the_zone(cloud):
    controller(cloud)
    vm = cloud.one(INSTANCE).inputs
    assert vm["name"] == "c1-controller" and vm["zone"] == "us-central1-a"
    assert vm["machineType"] == "n2-standard-2"
    assert vm["bootDisk"]["initializeParams"]["size"] == 50
    assert all("accessConfigs" not in nic for nic in vm["networkInterfaces"])
    assert vm["metadata"]["clusterprint-role"] == "controller"
    # The Slurm files travel apart from the startup script: the running VM follows them.
    assert vm["metadata"]["clusterprint-slurm-config"] == SLURM_CONFIG


def test_the_secrets_have_no_version_and_only_their_names_travel(cloud):
    secret_name = controller(cloud)
    assert sorted(s.inputs["secretId"] for s in cloud.of_type(SECRET)) == [
        "c1-db-password", "c1-jwt-key", "c1-munge-key"]
    assert secret_name == "projects/test-project/secrets/c1-munge-key"
    assert not cloud.of_type("gcp:secretmanager/secretVersion:SecretVersion")
    metadata = cloud.one(INSTANCE).inputs["metadata"]
    assert metadata["clusterprint-munge-secret"] == secret_name
    assert metadata["clusterprint-jwt-secret"] == "projects/test-project/secrets/c1-jwt-key"
    assert metadata["clusterprint-db-secret"] == "projects/test-project/secrets/c1-db-password"


def test_the_state_disk_is_protected_and_attached_under_the_name_the_script_mounts(cloud):
    controller(cloud)
    disk = cloud.one("gcp:compute/disk:Disk")
    assert disk.protect
    attached = cloud.one("gcp:compute/attachedDisk:AttachedDisk").inputs
    assert attached["deviceName"] == "clusterprint-state"


def test_the_controller_may_write_the_key_and_nothing_in_compute(cloud):
    controller(cloud)
    project_roles = {r.inputs["role"] for r in cloud.of_type("gcp:projects/iAMMember:IAMMember")}
    assert project_roles == {"roles/logging.logWriter", "roles/monitoring.metricWriter"}
    account = cloud.one("gcp:serviceaccount/account:Account").inputs
    email = f"{account['accountId']}@test-project.iam.gserviceaccount.com"
    grants = {(r.inputs["secretId"], r.inputs["role"], r.inputs["member"]) for r in
              cloud.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")}
    # viewer: the first boot lists the versions to learn whether a key exists yet; on each
    # secret, not the project: the controller adds versions to its three secrets only.
    assert grants == {(f"projects/test-project/secrets/c1-{key}", role, f"serviceAccount:{email}")
                      for key in ("munge-key", "jwt-key", "db-password")
                      for role in ("roles/secretmanager.secretVersionAdder",
                                   "roles/secretmanager.secretAccessor",
                                   "roles/secretmanager.viewer")}
    assert cloud.one(INSTANCE).inputs["serviceAccount"]["email"] == email
    bucket = cloud.one("gcp:storage/bucketIAMMember:BucketIAMMember").inputs
    assert bucket["bucket"] == "ckpt" and bucket["role"] == "roles/storage.objectUser"


def test_slurm_files_over_compute_engines_metadata_limit_are_refused_before_any_vm(cloud):
    # A value of 256 KiB + 1 byte: the Compute API would refuse the VM at `pulumi up`.
    too_large = "x" * (node_metadata.VALUE_LIMIT_BYTES + 1)
    with pytest.raises(node_metadata.MetadataTooLarge,
                       match="c1-controller: metadata clusterprint-slurm-config is 262145 "
                             "bytes; Compute Engine takes at most 262144"):
        controller(cloud, too_large)
