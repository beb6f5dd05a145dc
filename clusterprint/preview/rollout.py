"""How each change of a plan diff reaches the VMs already running, if it does by itself.

`pulumi up` updates a VM's metadata and a group's template in place, but a running VM
reads most of what it is given only when it boots:

- ``live``: the controller's and login nodes' Slurm files (metadata
  ``clusterprint-slurm-config``): their clusterprint-config-sync service installs a new
  value and reconfigures Slurm (restarting slurmctld where a changed key needs it), and
  the compute nodes follow through configless slurmd.
  The TensorBoard's name is live too: its upload command reads it at each run.
- ``next-boot``: any other metadata of the controller or a login node, the startup script
  first: it runs at boot only.
- ``recreate``: a nodeset's changed instance template (its image, startup script,
  machine, disks are all in it): the group moves to it, but its OPPORTUNISTIC update
  policy (components/nodeset.py) applies it to VMs created from then on only, so the
  running ones keep the old template until they are recreated.
- ``new-image``: a controller or login VM whose boot image changed (a new content-named
  image: other software, another Slurm): `pulumi up` replaces the VM itself, which boots
  the new image; the controller's state disk is kept across it. A nodeset's new image is a
  ``recreate`` that names both images.

A VM that is itself replaced, or a group created or replaced, comes up with everything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from clusterprint.contract import naming, node_metadata

if TYPE_CHECKING:
    from clusterprint.preview.diff import InputChange, ResourceChange
    from clusterprint.preview.plan import Plan

Kind = Literal["live", "next-boot", "recreate", "new-image"]
#: The order they are listed in: what needs an operator first.
KIND_ORDER: tuple[Kind, ...] = ("new-image", "recreate", "next-boot", "live")
INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
#: Where a VM and an instance template name their boot image.
VM_IMAGE = "bootDisk.initializeParams.image"
TEMPLATE_IMAGE = "disks[0].sourceImage"
#: What replacing a VM for its new image means, by its role.
NEW_IMAGE = {"controller": "Slurm's controller is down while the new VM boots; its state disk "
                           "(queue, job ids, accounting database) is kept and reattached, and "
                           "running jobs go on on their nodes",
             "login": "users' sessions on it end; /home and the jobs are untouched"}
#: The input of a VM that its running node follows with clusterprint-config-sync.
LIVE_INPUT = f"metadata.{node_metadata.SLURM_CONFIG}"
#: Other metadata a running VM reads whenever it is used, not at boot.
READ_WHEN_USED = {f"metadata.{node_metadata.TENSORBOARD}":
                  "clusterprint-tensorboard-upload reads it from the metadata server at each "
                  "run",
                  f"metadata.{node_metadata.NODESET_SIZES}":
                  "the remediation loop reads the desired counts at each pass: a raised count "
                  "creates the missing VMs; a lowered one drains the surplus in Slurm (reason "
                  "cp:scale-down), idle nodes first, and deletes exactly those VMs once their "
                  "jobs end; Pulumi leaves the groups' targetSize alone (ignore_changes)"}
#: What a running VM does with a new value of LIVE_INPUT, by its role.
LIVE = {"controller": "its clusterprint-config-sync service installs the new Slurm files and "
                      "reconfigures slurmctld (or restarts it where a changed key needs "
                      "that); compute nodes follow through configless slurmd",
        "login": "its clusterprint-config-sync service installs the new Slurm files; "
                 "client commands read them from their next run"}
#: How a standalone VM runs its startup script again: a reset reboots it; the guest
#: environment's runner reruns the script in place (Compute docs "Rerun a startup script").
RERUN_SCRIPT = "sudo google_metadata_script_runner startup"


@dataclass(frozen=True)
class Rollout:
    """What an operator must know about one changed resource's running VMs."""

    kind: Kind
    name: str
    #: The changed inputs it is about (a group moved by a replaced template: the template).
    inputs: tuple[str, ...]
    how: str

    def as_json(self) -> dict[str, Any]:
        """The rollout as ``diff --json`` prints it."""
        return {"kind": self.kind, "name": self.name, "inputs": list(self.inputs),
                "how": self.how}


def rollouts(changes: list[ResourceChange], new: Plan) -> list[Rollout]:
    """The rollout of every change that concerns running VMs, operator's work first."""
    inputs_of = {(r.type, r.name): r.inputs for r in new.resources}
    templates = {c.name for c in changes if c.type == TEMPLATE}
    found: list[Rollout] = []
    images = {c.name: image for c in changes if c.type == TEMPLATE
              for image in [_image_change(c, TEMPLATE_IMAGE)] if image is not None}
    for change in changes:
        inputs = inputs_of.get((change.type, change.name), {})
        if change.type == INSTANCE and change.action == "update":
            found += _vm_rollouts(change, inputs)
        elif change.type == INSTANCE and change.action == "replace":
            image = _image_change(change, VM_IMAGE)
            if image is not None:
                role = inputs.get("metadata", {}).get(node_metadata.ROLE)
                found.append(Rollout(
                    "new-image", change.name, (VM_IMAGE,),
                    f"boots {_moved(image)}: `pulumi up` replaces this VM; "
                    + NEW_IMAGE["controller" if role == "controller" else "login"]))
        elif change.type == GROUP and change.action == "update":
            via = tuple(c.path for c in change.inputs if c.path.startswith("versions")) or (
                tuple(sorted(templates.intersection(change.replaced_dependencies))))
            if via:
                image = next((images[name] for name in via if name in images), None)
                found.append(_group_rollout(change, inputs, via, image))
    return sorted(found, key=lambda r: (KIND_ORDER.index(r.kind), r.name))


def _vm_rollouts(change: ResourceChange, inputs: dict[str, Any]) -> list[Rollout]:
    paths = [c.path for c in change.inputs if c.path.startswith("metadata.")]
    found = []
    if LIVE_INPUT in paths:
        role = inputs.get("metadata", {}).get(node_metadata.ROLE)
        found.append(Rollout("live", change.name, (LIVE_INPUT,), LIVE[
            "controller" if role == "controller" else "login"]))
    found += [Rollout("live", change.name, (p,), READ_WHEN_USED[p]) for p in paths
              if p in READ_WHEN_USED]
    at_boot = tuple(p for p in paths if p != LIVE_INPUT and p not in READ_WHEN_USED)
    if at_boot:
        vm, zone = inputs.get("name", change.name), inputs.get("zone", "ZONE")
        found.append(Rollout(
            "next-boot", change.name, at_boot,
            f"read at boot only: reboot the VM (`gcloud compute instances reset {vm} "
            f"--zone {zone}`) or rerun its startup script on it (`{RERUN_SCRIPT}`)"))
    return found


def _image_change(change: ResourceChange, path: str) -> InputChange | None:
    """The change of ``change``'s boot image (at input ``path``), if it has one."""
    return next((c for c in change.inputs if c.path == path), None)


def _moved(image: InputChange) -> str:
    return f"a new image, {image.new} (was {image.old})"


def _group_rollout(change: ResourceChange, inputs: dict[str, Any],
                   via: tuple[str, ...], image: InputChange | None) -> Rollout:
    zone = inputs.get("zone", "ZONE")
    # Pulumi auto-names the group: its logical name, a dash and a random suffix.
    group = (f"$(gcloud compute instance-groups managed list --filter='name~^{change.name}-' "
             f"--format='value(name)')")
    new = f"its template boots {_moved(image)}; " if image is not None else ""
    if re.search(rf"-{naming.ELASTIC_GROUP}(-\d+)?$", change.name):
        return Rollout(
            "recreate", change.name, via,
            f"{new}its elastic VMs take the new template as power saving creates them; a "
            "running one keeps the old until Slurm powers it down idle (`scontrol power down "
            "NODE` to hasten it)")
    return Rollout(
        "recreate", change.name, via,
        f"{new}its running VMs keep the old instance template until they are recreated (the "
        "update policy is OPPORTUNISTIC): drain their Slurm nodes, then `gcloud compute "
        f"instance-groups managed rolling-action replace {group} --zone {zone}`")
