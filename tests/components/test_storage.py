"""SharedStorage on its own: sizes, locations, network names and protection."""

from __future__ import annotations

import pytest

from clusterprint.blueprint.model import Bucket, FilestoreHome, Lustre
from clusterprint.components.storage import SharedStorage

FILESTORE = "gcp:filestore/instance:Instance"
LUSTRE = "gcp:lustre/instance:Instance"
BUCKET = "gcp:storage/bucket:Bucket"
NETWORK = "projects/p-roject/global/networks/n"


def storage(cloud, **kwargs) -> dict:
    """Declare a SharedStorage and resolve its mount sources."""
    def program():
        shared = SharedStorage("st", cluster="c1", project="p-roject", region="us-central1",
                               zone="us-central1-a", network=NETWORK, node_tag="c1",
                               service_range="10.200.0.0/20", **kwargs)
        return {"home": shared.filestore_source, "lustre": shared.lustre_sources,
                "buckets": shared.bucket_names}
    return cloud.run(program)


@pytest.mark.parametrize(("tier", "location"), [("ZONAL", "us-central1-a"),
                                                ("BASIC_HDD", "us-central1-a"),
                                                ("REGIONAL", "us-central1"),
                                                ("ENTERPRISE", "us-central1")])
def test_filestore_lives_in_the_zone_or_region_of_its_tier(cloud, tier, location):
    storage(cloud, filestore=FilestoreHome(tier=tier, capacity_gib=2560))
    assert cloud.one(FILESTORE).inputs["location"] == location


def test_filestore_home_on_private_service_access(cloud):
    result = storage(cloud, filestore=FilestoreHome(tier="ZONAL", capacity_gib=2560))
    home = cloud.one(FILESTORE).inputs
    assert home["tier"] == "ZONAL" and home["name"] == "c1-home"
    assert home["fileShares"] == {"name": "home", "capacityGb": 2560}
    assert home["networks"][0]["network"] == NETWORK
    assert home["networks"][0]["connectMode"] == "PRIVATE_SERVICE_ACCESS"
    assert result["home"] == "nfs:10.200.0.2:/home"


def test_lustre_takes_strings_and_stays_off_gke(cloud):
    result = storage(cloud, lustre=[Lustre(name="scratch", filesystem="scratch",
                                           performance_tier=500, capacity_gib=18000)])
    lustre = cloud.one(LUSTRE).inputs
    assert lustre["capacityGib"] == "18000"
    assert lustre["perUnitStorageThroughput"] == "500"
    assert lustre["instanceId"] == "c1-scratch" and lustre["location"] == "us-central1-a"
    assert lustre["network"] == NETWORK and lustre["gkeSupportEnabled"] is False
    assert result["lustre"] == {"scratch": "10.200.0.3@tcp:/scratch"}
    lnet = cloud.one("gcp:compute/firewall:Firewall").inputs
    assert lnet["sourceRanges"] == ["10.200.0.0/20"] and lnet["targetTags"] == ["c1"]


def test_data_is_protected_in_pulumi_and_in_the_api(cloud):
    storage(cloud, filestore=FilestoreHome(), buckets=[Bucket(bucket="c1-ckpts")],
            lustre=[Lustre(name="s", filesystem="s", capacity_gib=18000)])
    data = [cloud.one(FILESTORE), cloud.one(LUSTRE), cloud.one(BUCKET)]
    assert all(r.protect for r in data)
    assert cloud.one(FILESTORE).inputs["deletionProtectionEnabled"] is True
    bucket = cloud.one(BUCKET).inputs
    assert bucket["forceDestroy"] is False and bucket["uniformBucketLevelAccess"] is True
    assert bucket["location"] == "US-CENTRAL1"


def test_unprotected_storage_can_be_destroyed(cloud):
    storage(cloud, filestore=FilestoreHome(), buckets=[Bucket(bucket="c1-ckpts")],
            protect=False)
    assert not cloud.one(FILESTORE).protect and not cloud.one(BUCKET).protect
    assert cloud.one(FILESTORE).inputs["deletionProtectionEnabled"] is False


def test_an_existing_bucket_is_mounted_not_created(cloud):
    result = storage(cloud, buckets=[Bucket(bucket="theirs", create=False)])
    assert not cloud.of_type(BUCKET)
    assert result["buckets"] == {"theirs": "theirs"}
