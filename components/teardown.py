"""What ``pulumi destroy`` does not end: the stack output ``after_destroy``.

``pulumi destroy`` works from the stack's state and does not run this program, so nothing
here can print when it refuses or finishes; Pulumi's own refusal of a protected resource
names only the resource. So every ``pulumi up`` ends with these lines in its outputs
(``pulumi stack output after_destroy`` prints them again), built from the blueprint: what
keeps billing after a destroy (what the stack consumes but never created, what it leaves
on purpose) and that destroy kills running jobs. README "Tear it down" says the same.
"""

from __future__ import annotations

from clusterprint.blueprint.model import Blueprint, reservation_owner
from clusterprint.facts.images import FAMILY_PREFIX

#: Said first: destroy deletes the VMs at once, whatever runs on them.
RUNNING_JOBS = ("pulumi destroy deletes every VM at once and kills running jobs without "
                "requeue: on the login node check `squeue`, drain with `sudo scontrol update "
                "nodename=ALL state=drain reason=teardown` and wait for the jobs (or "
                "`scancel` them) first")
#: The images, whoever built them (clusterprint image build, or the stack's NodeImage).
IMAGES = (f"node images (families {FAMILY_PREFIX}*) stay and bill for storage, built by "
          f"`clusterprint image build` or by this stack, since other clusters may boot them: "
          f"`gcloud compute images list --filter='family~^{FAMILY_PREFIX}'`, then "
          f"`gcloud compute images delete NAME`")
#: Pulumi's own state, which the stack does not hold.
STATE = ("Pulumi's state (the bucket of `pulumi login gs://...`) stays: `pulumi stack rm` "
         "forgets the stack; the bucket is yours to delete")
#: The peering the stack abandons (components/private_service_access.py).
PEERING = ("the private service access peering is abandoned, not deleted (it costs nothing); "
           "README \"Tear it down\" step 4 removes it if destroy stops at the VPC")


def after_destroy(bp: Blueprint) -> list[str]:
    """The lines of ``after_destroy`` for ``bp``: jobs first, then each thing that bills."""
    lines = [RUNNING_JOBS]
    consumers: dict[str, list[str]] = {}
    for nodeset in bp.slurm.nodesets:
        if nodeset.reservation:
            consumers.setdefault(nodeset.reservation, []).append(nodeset.name)
    for reservation, nodesets in consumers.items():
        owner, name = reservation_owner(reservation, bp.project or "")
        project = f" --project {owner}" if owner else ""
        lines.append(
            f"reservation {reservation} ({', '.join(f'nodeset {n}' for n in nodesets)}) is "
            f"consumed, not created, by this stack: it bills until it ends or you release it "
            f"(`gcloud compute reservations delete {name} --zone {bp.zone}{project}`; a "
            f"calendar or dense reservation is released with Google Cloud, not by deleting "
            f"VMs)")
    for bucket in bp.storage.buckets:
        if bucket.create:
            lines.append(f"bucket gs://{bucket.bucket} is never force-destroyed: destroy "
                         f"refuses it while it holds objects (`gcloud storage rm --recursive "
                         f"\"gs://{bucket.bucket}/**\"` first); what is left there bills")
        else:
            lines.append(f"bucket gs://{bucket.bucket} is not the stack's (create: false): it "
                         f"and its contents, checkpoints included, stay and bill")
    if bp.storage.protect:
        lines.append("storage.protect is true: destroy refuses the file systems, the buckets "
                     "and the controller's state disk until `storage.protect: false` and "
                     "`pulumi up` (README \"Tear it down\")")
    return [*lines, IMAGES, STATE, PEERING]
