"""What a project and its people need before ``pulumi up``: the APIs and the IAM roles.

Derived from what the stack creates, not listed by hand: every resource type the
components can register maps to the API that serves it and to the predefined role that
lets the deployer create it (tests/clusterprint/facts/test_prerequisites.py plans every
reference blueprint and fails on a type missing here, or a row no plan uses). What the
running cluster needs beyond its resources (OS Login, IAP, the nodes' logs and metrics)
is a table of its own, with the component line that makes it needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Service:
    """The API a resource type is created through, and the role that may create it."""

    api: str
    deployer_role: str
    #: APIs the service itself calls in the project to build what the resource holds.
    uses: tuple[str, ...] = ()


_COMPUTE = Service("compute.googleapis.com", "roles/compute.admin")

# Sources: the API is the service name of each product's REST reference or audit-log page
# (cloud.google.com/compute/docs/reference/rest/v1; filestore/docs/audit-logging: service
# name file.googleapis.com; managed-lustre/docs/reference/rest; secret-manager/docs/
# reference/rest: secretmanager.googleapis.com; iam/docs/reference/rest: service accounts
# and custom roles; resource-manager/reference/rest: projects.setIamPolicy;
# service-infrastructure/docs/service-networking/reference/rest: servicenetworking.
# googleapis.com; storage/docs/json_api; vertex-ai/docs/reference/rest (aiplatform);
# monitoring/api/ref_v3 (dashboards, alertPolicies, notificationChannels);
# cluster-director/docs/reference/rpc/
# google.cloud.hypercomputecluster.v1: hypercomputecluster.googleapis.com).
# Roles: cloud.google.com/iam/docs/roles-permissions/<service> (file: roles/file.editor;
# lustre: roles/lustre.admin; secretmanager: roles/secretmanager.admin, which holds
# secrets.create and secrets.setIamPolicy; hypercomputecluster: roles/hypercomputecluster.
# editor, Beta); the private connection: vpc/docs/configure-private-services-access
# ("Compute Network Admin (roles/compute.networkAdmin) can create allocated IP address
# ranges and manage private connections"); monitoring/access-control (monitoring.editor);
# TensorBoard: vertex-ai/docs/general/access-control (aiplatform.user holds
# tensorboards.create).
RESOURCE_SERVICES: dict[str, Service] = {
    **{f"gcp:compute/{resource}": _COMPUTE for resource in (
        "attachedDisk:AttachedDisk", "disk:Disk", "firewall:Firewall",
        "globalAddress:GlobalAddress", "instance:Instance",
        "instanceGroupManager:InstanceGroupManager", "instanceTemplate:InstanceTemplate",
        "network:Network", "networkPeering:NetworkPeering", "resizeRequest:ResizeRequest",
        "resourcePolicy:ResourcePolicy", "router:Router", "routerNat:RouterNat",
        "subnetwork:Subnetwork")},
    # components/node_image.py: `pulumi up` builds a missing image with Compute calls of the
    # deployer's own (images.get/create, a builder VM without a service account).
    "pulumi-python:dynamic/clusterprint:BuiltImage": _COMPUTE,
    "gcp:filestore/instance:Instance": Service("file.googleapis.com", "roles/file.editor"),
    "gcp:lustre/instance:Instance": Service("lustre.googleapis.com", "roles/lustre.admin"),
    "gcp:secretmanager/secret:Secret": Service("secretmanager.googleapis.com",
                                               "roles/secretmanager.admin"),
    "gcp:secretmanager/secretIamMember:SecretIamMember": Service(
        "secretmanager.googleapis.com", "roles/secretmanager.admin"),
    "gcp:serviceaccount/account:Account": Service("iam.googleapis.com",
                                                  "roles/iam.serviceAccountAdmin"),
    "gcp:projects/iAMCustomRole:IAMCustomRole": Service("iam.googleapis.com",
                                                        "roles/iam.roleAdmin"),
    "gcp:projects/iAMMember:IAMMember": Service("cloudresourcemanager.googleapis.com",
                                                "roles/resourcemanager.projectIamAdmin"),
    "gcp:servicenetworking/connection:Connection": Service(
        "servicenetworking.googleapis.com", "roles/compute.networkAdmin"),
    "gcp:storage/bucket:Bucket": Service("storage.googleapis.com", "roles/storage.admin"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": Service("storage.googleapis.com",
                                                           "roles/storage.admin"),
    "gcp:vertex/aiTensorboard:AiTensorboard": Service("aiplatform.googleapis.com",
                                                      "roles/aiplatform.user"),
    **{f"gcp:monitoring/{resource}": Service("monitoring.googleapis.com",
                                             "roles/monitoring.editor") for resource in (
        "dashboard:Dashboard", "alertPolicy:AlertPolicy",
        "notificationChannel:NotificationChannel")},
    # The managed cluster's network, VMs, Filestore, Lustre and buckets are made by the
    # service in the project, whose APIs must be on too (training-clusters/get-started,
    # "Enable APIs": compute, servicenetworking, storage, lustre if used, cloudresourcemanager;
    # "Enable the necessary APIs, including the Compute Engine, Filestore, ...").
    "gcp:hypercomputecluster/cluster:Cluster": Service(
        "hypercomputecluster.googleapis.com", "roles/hypercomputecluster.editor",
        uses=("compute.googleapis.com", "servicenetworking.googleapis.com",
              "file.googleapis.com", "lustre.googleapis.com", "storage.googleapis.com",
              "cloudresourcemanager.googleapis.com")),
}

#: APIs the running cluster calls that no resource of the stack is created through.
RUNTIME_APIS: dict[str, str] = {
    # components/cluster.py sets enable-oslogin=TRUE on every node; the guest reads users
    # and keys from the OS Login API (compute/docs/oslogin/rest: oslogin.googleapis.com).
    "oslogin.googleapis.com": "OS Login: nodes take users and SSH keys from IAM",
    # Nodes have no external IP; the `ssh` export tunnels through IAP
    # (components/cluster.py iap_ssh_command; iap/docs/using-tcp-forwarding).
    "iap.googleapis.com": "IAP TCP forwarding: `pulumi stack output ssh`",
    # Every node's account holds roles/logging.logWriter and roles/monitoring.metricWriter
    # (clusterprint/facts/iam.py NODE_PROJECT_ROLES): the Ops Agent ships journal and metrics.
    "logging.googleapis.com": "the nodes' logs (Ops Agent)",
    "monitoring.googleapis.com": "the nodes' and GPUs' metrics (Ops Agent, DCGM)",
}

#: Roles the deployer needs besides creating the resources, with why.
DEPLOYER_EXTRA_ROLES: dict[str, str] = {
    # Every VM and template runs as a node service account the stack creates
    # (iam/docs/attach-service-accounts: attaching one to a resource needs the Service
    # Account User role on it).
    "roles/iam.serviceAccountUser": "attach the node service accounts to VMs and templates",
    # Only to enable the APIs above (serviceusage: services.enable); a project owner can
    # enable them instead.
    "roles/serviceusage.serviceUsageAdmin": "gcloud services enable (once per project)",
}

#: Roles each person who logs in needs (compute/docs/oslogin/set-up-oslogin, "Assign OS
#: Login IAM roles"; iap/docs/using-tcp-forwarding: IAP-Secured Tunnel User).
USER_ROLES: dict[str, str] = {
    "roles/compute.osLogin": "log in to the login nodes (roles/compute.osAdminLogin for sudo); "
                             "on the project, for gcloud compute ssh",
    "roles/iap.tunnelResourceAccessor": "open the IAP tunnel to a node without an external IP",
    "roles/iam.serviceAccountUser": "on the login nodes' service account: OS Login asks it "
                                    "of users of a VM that has a service account",
}


def services_of(resource_types: Iterable[str]) -> list[Service]:
    """The services of the cloud resource types in a plan (components have none).

    A type without a row raises KeyError naming it: a resource the tables do not know
    would otherwise fail the first ``pulumi up`` on a project without its API.
    """
    cloud = sorted({t for t in resource_types if not t.startswith("clusterprint:")})
    unknown = [t for t in cloud if t not in RESOURCE_SERVICES]
    if unknown:
        raise KeyError(f"no API and deployer role for {', '.join(unknown)}: add them to "
                       "clusterprint/facts/prerequisites.py RESOURCE_SERVICES")
    return [RESOURCE_SERVICES[t] for t in cloud]


def required_apis(resource_types: Iterable[str]) -> list[str]:
    """Every API a stack with these resource types needs, runtime ones included, sorted."""
    services = services_of(resource_types)
    return sorted({api for s in services for api in (s.api, *s.uses)} | RUNTIME_APIS.keys())


def deployer_roles(resource_types: Iterable[str]) -> list[str]:
    """Every role the identity running ``pulumi up`` needs for these resource types."""
    return sorted({s.deployer_role for s in services_of(resource_types)}
                  | DEPLOYER_EXTRA_ROLES.keys())


#: Per deployer role, the permissions of it that ``pulumi up`` uses: what ``clusterprint
#: preflight`` asks testIamPermissions about, so a missing role is found before the first
#: create fails (cloud.google.com/iam/docs/roles-permissions/<service>: each is in its
#: role). serviceUsageAdmin is left out: enabling the APIs is once per project and may be
#: someone else's part; preflight names a disabled API instead.
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "roles/compute.admin": (
        "compute.networks.create", "compute.subnetworks.create", "compute.firewalls.create",
        "compute.routers.create", "compute.instances.create", "compute.instanceTemplates.create",
        "compute.instanceGroupManagers.create", "compute.disks.create",
        "compute.resourcePolicies.create", "compute.globalAddresses.create",
        "compute.images.create"),
    "roles/compute.networkAdmin": ("servicenetworking.services.addPeering",),
    "roles/file.editor": ("file.instances.create",),
    "roles/lustre.admin": ("lustre.instances.create",),
    "roles/secretmanager.admin": ("secretmanager.secrets.create",
                                  "secretmanager.secrets.setIamPolicy"),
    "roles/iam.serviceAccountAdmin": ("iam.serviceAccounts.create",),
    "roles/iam.roleAdmin": ("iam.roles.create",),
    "roles/resourcemanager.projectIamAdmin": ("resourcemanager.projects.setIamPolicy",),
    "roles/iam.serviceAccountUser": ("iam.serviceAccounts.actAs",),
    "roles/storage.admin": ("storage.buckets.create", "storage.buckets.setIamPolicy"),
    "roles/aiplatform.user": ("aiplatform.tensorboards.create",),
    "roles/monitoring.editor": ("monitoring.dashboards.create", "monitoring.alertPolicies.create",
                                "monitoring.notificationChannels.create"),
    "roles/hypercomputecluster.editor": ("hypercomputecluster.clusters.create",),
}
#: The deployer roles no permission check covers, with why.
UNCHECKED_ROLES = frozenset({"roles/serviceusage.serviceUsageAdmin"})


def deployer_permissions(resource_types: Iterable[str]) -> dict[str, str]:
    """Each permission ``pulumi up`` needs for these resource types, and the role holding it."""
    return {permission: role for role in deployer_roles(resource_types)
            if role not in UNCHECKED_ROLES for permission in ROLE_PERMISSIONS[role]}
