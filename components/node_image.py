"""NodeImage: a node image clusterprint builds, built by ``pulumi up`` when it is missing.

``pulumi up`` of a first cluster stays one command: each image the cluster's VMs boot is a
resource, and the VMs wait for it. Its dynamic provider runs the same build as
``clusterprint image build`` (``clusterprint/build/builder.py``): create keeps an image of
that exact name already in the project (another cluster's, or the command's) and builds a
missing one on a builder VM in the cluster's subnetwork; a new name (new content) or another
project is a replacement; delete leaves the image in place, because images are shared by
every cluster of the project that boots the same software (delete one by hand:
``gcloud compute images delete NAME``).

Pulumi pickles the provider into the stack's state and unpickles it in a process of its
own, so the provider holds no state at all: the install script is rendered again from the
image's kind (its name in the inputs must match: the same clusterprint renders it), and the
credentials are read at create time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi.dynamic

from clusterprint.render.images import NodeImage as ImageToBuild
from clusterprint.render.images import node_image

#: Inputs whose change makes another image: the content's name, or where it must be.
REPLACE_ON = ("name", "project")


class BuiltImageProvider(pulumi.dynamic.ResourceProvider):
    """Builds the image of the inputs' ``kind`` unless the project has it; never deletes."""

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        """Build (or adopt) the image; its id is its path."""
        from clusterprint.build.builder import BuildSite, ImageBuild, Outcome

        image = _rendered(props)
        site = BuildSite(project=props["project"], zone=props["zone"],
                         subnetwork=props.get("subnetwork") or None,
                         external_ip=bool(props["externalIp"]))
        outcome = ImageBuild(_api(props["project"]), image, site, report=_progress).run()
        return pulumi.dynamic.CreateResult(props["path"], {**props,
                                                           "built": outcome is Outcome.BUILT})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]
             ) -> pulumi.dynamic.DiffResult:
        """Another name or project is another image; anything else (where the builder ran)
        changes nothing of an image that exists."""
        replaces = [key for key in REPLACE_ON if olds.get(key) != news.get(key)]
        return pulumi.dynamic.DiffResult(changes=bool(replaces), replaces=replaces,
                                         delete_before_replace=False)

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        """``pulumi refresh``: an image deleted by hand leaves the state, so the next
        ``pulumi up`` builds it again."""
        found = _api(props["project"]).image(props["name"])
        return pulumi.dynamic.ReadResult(id_ if found else None, props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing: other clusters may boot the image, and a rebuild takes long."""


def _rendered(props: dict[str, Any]) -> ImageToBuild:
    image = node_image(props["kind"])
    if image.name != props["name"]:
        raise ValueError(f"this clusterprint renders the {props['kind']} image as {image.name}, "
                         f"the stack asks for {props['name']}: run `pulumi up` with the "
                         "clusterprint that planned it")
    return image


def _api(project: str):
    from clusterprint.build.compute import ComputeApi, authorized_session, compute_url

    session, _ = authorized_session()
    return ComputeApi(session, project, compute_url())


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class BuiltImage(pulumi.dynamic.Resource, module="clusterprint", name="BuiltImage"):
    """The dynamic resource: its inputs name the image and where to build it."""

    path: pulumi.Output[str]

    def __init__(self, name: str, props: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(BuiltImageProvider(), name, {**props, "built": None}, opts)


class NodeImage(pulumi.ComponentResource):
    """One image clusterprint builds, in ``project``: built by ``pulumi up`` if missing.

    The builder runs in ``zone`` and ``subnetwork`` (None: the project's default network),
    with an external IP only where ``external_ip``; without one, the subnetwork needs Cloud
    NAT: pass the network that makes it in ``depends_on`` (the build waits for it; a
    component's own ``depends_on`` would not reach the build). ``path`` is what a boot disk
    names.
    """

    def __init__(self, name: str, *, image: ImageToBuild, project: str, zone: str,
                 subnetwork: pulumi.Input[str] | None = None, external_ip: bool = False,
                 depends_on: Sequence[pulumi.Resource] = (),
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterprint:index:NodeImage", name, None, opts)
        self.built = BuiltImage(f"{name}-built", {
            "kind": image.kind, "name": image.name, "family": image.family,
            "base": image.base.path, "builderMachineType": image.builder_machine_type,
            "project": project, "zone": zone, "subnetwork": subnetwork,
            "externalIp": external_ip, "path": image.path(project)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)))
        self.path: pulumi.Output[str] = self.built.path
        self.register_outputs({"path": self.path})
