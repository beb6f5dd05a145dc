"""NodeImage: its resource under Pulumi's mocks, and its provider against a local fake of the
Compute API, as the dynamic provider's own process runs it (unpickled)."""

from __future__ import annotations

import base64
import subprocess
import sys

import pytest
from pulumi.dynamic.dynamic import serialize_provider

from clusterprint.components.node_image import REPLACE_ON, BuiltImage, BuiltImageProvider, NodeImage
from clusterprint.preview.replacements import forces_replacement
from clusterprint.render.images import node_image
from tests.support.image_compute_fake import FakeImageCompute, installs, reach_in_process
from tests.support.paths import ROOT

BUILT = "pulumi-python:dynamic/clusterprint:BuiltImage"
PROJECT, ZONE = "my-project", "us-central1-a"
SUBNET = "projects/my-project/regions/us-central1/subnetworks/demo-subnet"
RDMA = node_image("gpu-rdma")


def test_the_resource_names_the_image_and_where_to_build_it(cloud):
    path = cloud.run(lambda: NodeImage("demo-image-gpu-rdma", image=RDMA, project=PROJECT,
                                       zone=ZONE, subnetwork=SUBNET).path)
    assert path == f"projects/{PROJECT}/global/images/{RDMA.name}"
    component = cloud.one("clusterprint:index:NodeImage")
    built = cloud.one(BUILT)
    assert (built.name, built.parent) == ("demo-image-gpu-rdma-built", component.name)
    assert {k: v for k, v in built.inputs.items() if k != "__provider"} == {
        "kind": "gpu-rdma", "name": RDMA.name, "family": "clusterprint-gpu-rdma",
        "base": RDMA.base.path, "builderMachineType": "n2-standard-16", "project": PROJECT,
        "zone": ZONE, "subnetwork": SUBNET, "externalIp": False, "path": path}
    # The script is rendered again by the provider, not carried in the stack's state.
    assert RDMA.script not in str(built.inputs)


@pytest.fixture
def fake(monkeypatch):
    compute_fake = FakeImageCompute(PROJECT, ZONE,
                                    install=lambda image: installs("base", "gpu", after=1))
    reach_in_process(compute_fake, monkeypatch)
    yield compute_fake
    compute_fake.stop()


def props(image=RDMA, **changes) -> dict:
    base = {"kind": image.kind, "name": image.name, "family": image.family,
            "base": image.base.path, "builderMachineType": image.builder_machine_type,
            "project": PROJECT, "zone": ZONE, "subnetwork": SUBNET, "externalIp": False,
            "path": image.path(PROJECT), "built": None}
    return {**base, **changes}


def test_create_builds_a_missing_image_in_the_clusters_subnetwork(fake):
    result = BuiltImageProvider().create(props())
    assert result.id == f"projects/{PROJECT}/global/images/{RDMA.name}"
    assert result.outs["built"] is True
    assert fake.images[RDMA.name]["family"] == "clusterprint-gpu-rdma"
    (insert,) = [c.body for c in fake.calls if c.method == "POST" and c.verb == "instances"]
    assert insert["networkInterfaces"] == [{"subnetwork": SUBNET}]
    assert fake.instances == {} and fake.disks == {}


def test_create_adopts_an_image_another_cluster_built(fake):
    fake.images[RDMA.name] = {"name": RDMA.name}
    result = BuiltImageProvider().create(props())
    assert result.outs["built"] is False
    assert fake.verbs() == [f"GET {RDMA.name}"]


def test_create_refuses_a_name_this_clusterprint_does_not_render(fake):
    with pytest.raises(ValueError, match="run `pulumi up` with the clusterprint that planned"):
        BuiltImageProvider().create(props(name="clusterprint-gpu-rdma-000000000000"))
    assert fake.calls == []


def test_a_failed_build_fails_the_create_naming_the_step_and_the_console(fake):
    fake.install = lambda image: installs("base", "gpu", result="failed", failure="line 9: "
                                          "dkms build", after=1)
    with pytest.raises(Exception) as failed:
        BuiltImageProvider().create(props())
    lines = str(failed.value).splitlines()
    assert lines[0] == f"{RDMA.name}: failed at step gpu: line 9: dkms build"
    assert lines[-2].endswith("startup-script: <3>FAILED: line 9: dkms build")
    assert fake.instances == {}


@pytest.mark.parametrize(("change", "replaces"), [
    ({"name": "clusterprint-gpu-rdma-111111111111"}, ["name"]),
    ({"project": "other-project"}, ["project"]),
    ({"zone": "us-central1-b", "subnetwork": None, "externalIp": True}, []),
], ids=["new-content", "other-project", "elsewhere-built"])
def test_only_another_name_or_project_is_another_image(change, replaces):
    diff = BuiltImageProvider().diff(RDMA.path(PROJECT), props(), props(**change))
    assert (diff.changes, diff.replaces, diff.delete_before_replace) == (
        bool(replaces), replaces, False)


def test_clusterprint_diff_calls_the_same_changes_a_replacement():
    assert f"pulumi-python:{BuiltImage._resource_type_name}" == BUILT
    assert all(forces_replacement(BUILT, key) for key in REPLACE_ON)
    assert not any(forces_replacement(BUILT, key) for key in ("zone", "subnetwork"))


def test_delete_leaves_the_image_to_the_other_clusters(fake):
    fake.images[RDMA.name] = {"name": RDMA.name}
    BuiltImageProvider().delete(RDMA.path(PROJECT), props())
    assert fake.calls == [] and RDMA.name in fake.images


def test_refresh_drops_an_image_deleted_by_hand(fake):
    assert BuiltImageProvider().read(RDMA.path(PROJECT), props()).id is None
    fake.images[RDMA.name] = {"name": RDMA.name}
    assert BuiltImageProvider().read(RDMA.path(PROJECT), props()).id == RDMA.path(PROJECT)


def test_the_pickled_provider_is_a_reference_a_fresh_process_loads():
    """Pulumi stores the provider pickled (dill) and unpickles it in a process of its own."""
    pickled = serialize_provider(BuiltImageProvider())
    assert len(base64.b64decode(pickled)) < 500  # the class by name, no code or state in it
    code = ("import base64, sys, dill; provider = dill.loads(base64.b64decode(sys.argv[1])); "
            "print(type(provider).__module__, type(provider).__name__)")
    loaded = subprocess.run([sys.executable, "-c", code, pickled], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert loaded.stdout.split() == ["clusterprint.components.node_image", "BuiltImageProvider"]
