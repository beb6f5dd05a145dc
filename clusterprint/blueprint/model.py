"""The blueprint v1 model: the one source of truth for the format.

The JSON Schema in ``schemas/`` is generated from these classes, the rules in
``clusterprint.blueprint.rules`` read them, and the components and templates take them as
arguments. Field descriptions are what an editor shows next to each key.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterprint.contract import naming
from clusterprint.facts import catalog, machines

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,18}[a-z0-9]$"
LIST_NAME_PATTERN = r"^[a-z](?:[a-z0-9-]{0,14}[a-z0-9])?$"
# RFC 1034 labels (the managed API's partition ids): no hyphen at the end.
PARTITION_NAME_PATTERN = r"^[a-z](?:[a-z0-9-]{0,29}[a-z0-9])?$"
IMAGE_FAMILY_PATTERN = r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$"
PROJECT_PATTERN = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
REGION_PATTERN = r"^[a-z]+-[a-z]+[0-9]+$"
ZONE_PATTERN = r"^[a-z]+-[a-z]+[0-9]+-[a-z]$"
MACHINE_TYPE_PATTERN = r"^[a-z][a-z0-9]*-[a-z0-9]+(?:-[a-z0-9]+)*$"
NETWORK_PATTERN = (r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/global/networks/"
                   r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$")
SUBNETWORK_PATTERN = (r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/regions/[a-z]+-[a-z]+[0-9]+"
                      r"/subnetworks/[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$")
RESERVATION_PATTERN = (r"^(?:projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?"
                       r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?"
                       r"(?:/reservationBlocks/[a-z0-9-]+(?:/reservationSubBlocks/[a-z0-9-]+)?)?$")
# Slurm time: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]].
# ASCII digits: pydantic's regex engine reads \d as any Unicode digit, which Slurm does not.
SLURM_TIME_PATTERN = (r"^(?:UNLIMITED|INFINITE|[0-9]+(?::[0-9]{1,2}){0,2}"
                      r"|[0-9]+-[0-9]{1,2}(?::[0-9]{1,2}){0,2})$")
LABEL_KEY_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"
LABEL_VALUE_PATTERN = r"^[a-z0-9_-]{0,63}$"
BUCKET_PATTERN = r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$"
LUSTRE_FILESYSTEM_PATTERN = r"^[A-Za-z0-9]{1,8}$"
#: Where a path lands (boot scripts, sbatch lines, pyxis's comma- and colon-separated
#: --container-mounts, Hydra overrides, JSON) no one quoting fits every place: so a path holds
#: letters, digits, ``.``, ``_``, ``-`` and ``/`` only, never ``..`` (a dot is never followed
#: by a dot), and is at most PATH_MAX_LENGTH long. A mount path's other checks (absolute,
#: normalized, not on the system's folders) are rule storage.mounts, which says what to write.
MOUNT_PATH_PATTERN = r"^(?:\.?[A-Za-z0-9_/-])+\.?$"
#: A path on the nodes that names data: the same characters, and absolute.
NODE_PATH_PATTERN = r"^/(?:\.?[A-Za-z0-9_/-])+\.?$"
PATH_MAX_LENGTH = 1024
#: An IPv4 CIDR block's shape; rule network.cidr checks that it is a network (no host bits,
#: octets up to 255, a prefix up to 32). CIDRs reach only Compute Engine's API, never a script.
CIDR_PATTERN = r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}/[0-9]{1,2}$"
#: A Cloud SQL instance by resource name or connection name (project:region:instance).
CLOUD_SQL_INSTANCE_PATTERN = (r"^(?:projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/instances/"
                              r"|[a-z][a-z0-9-]{4,28}[a-z0-9]:[a-z]+-[a-z]+[0-9]+:)"
                              r"[a-z](?:[a-z0-9-]{0,96}[a-z0-9])?$")
SQL_DATABASE_PATTERN = r"^[A-Za-z0-9_]{1,64}$"
#: An email address the alerts are sent to: a plain local part and a domain name, nothing a
#: display name, comment or quoted local part could hide; it reaches only the Monitoring
#: API (a notification channel's label), never a rendered file.
EMAIL_PATTERN = (r"^[A-Za-z0-9._+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                 r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$")
#: Notification channels one cluster's alerts go to, at most (a short list of people).
ALERT_EMAILS_MAX = 16

Cidr = Annotated[str, Field(pattern=CIDR_PATTERN,
                            description="An IPv4 CIDR block such as 10.0.0.0/20: digits, dots "
                                        "and one slash only.",
                            examples=["10.0.0.0/20"])]

#: A key that names another entry has no pattern of its own: a rule finds the entry, else
#: says which names there are (a pattern would only say the name is malformed). What validate
#: accepts is that entry's name, held to its pattern, and only such a name is ever rendered.
REFERENCE_WORDS = ("Must equal that entry's name (a rule checks it), so it holds only what the "
                   "name's pattern allows.")
MOUNT_WORDS = ("Limited by its pattern to letters, digits, `.`, `_`, `-` and `/`, no `..`, at "
               f"most {PATH_MAX_LENGTH} characters: it reaches the nodes' boot scripts, every "
               "recipe job's command line and pyxis's container mounts (where `,` and `:` "
               "separate mounts).")


def reservation_owner(reservation: str, project: str) -> tuple[str, str]:
    """The project and name of the reservation a nodeset names (a block: its reservation);
    ``project`` where the name is not a path."""
    parts = reservation.split("/reservationBlocks/")[0].split("/")
    return (parts[1] if reservation.startswith("projects/") else project), parts[-1]


#: The escape of rule slurm.machine-type, beside every ``machine_type`` (one text for all).
MachineTypeUnlisted = Annotated[bool, Field(
    description="true: `machine_type` is newer than clusterprint's catalog, so validate only "
                "warns that it does not know it. Its VMs are then built as CPU nodes (no GPUs "
                "in Slurm, no GPU networks, the CPU image), the cost estimate has no price for "
                "them and their zones are not checked. Default false: an unknown type is an "
                "error.")]


class Strict(BaseModel):
    """Base for every blueprint section: unknown keys and loose types are errors.

    A typo in a hand-written file must fail loudly rather than fall back to a default.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PrivateServiceAccess(Strict):
    """The range peered with Google's service producers; Filestore and Lustre live in it."""

    prefix_length: int | None = Field(
        None, ge=8, le=24,
        description="Size of the range Google allocates (default 20 when `range` is unset).")
    range: Cidr | None = Field(
        None, description="An explicit range instead of `prefix_length`; must not overlap any "
                          "subnet.")

    @property
    def effective_prefix_length(self) -> int:
        """The prefix length reserved: the explicit range's, else the default /20."""
        if self.range is not None:
            return int(self.range.rsplit("/", 1)[1])
        return self.prefix_length if self.prefix_length is not None else 20


class Peering(Strict):
    """A VPC peering from the cluster's network to another network."""

    name: str = Field(pattern=LIST_NAME_PATTERN, description="Suffix of the peering's name.")
    peer_network: str = Field(pattern=NETWORK_PATTERN,
                              description="projects/P/global/networks/N of the peer.")
    export_custom_routes: bool = Field(False, description="Export this VPC's custom routes.")
    import_custom_routes: bool = Field(False, description="Import the peer's custom routes.")


class Network(Strict):
    """The system VPC, the GPU VPCs and how the cluster reaches the outside."""

    mtu: int | None = Field(
        None, ge=catalog.MTU_MIN, le=catalog.MTU_MAX,
        description="VPC MTU in bytes. Default: the GPU family's recommendation (8244 for "
                    "A3 High and A3 Mega, 8896 otherwise).")
    subnet_cidr: Cidr = Field("10.0.0.0/20", description="The system subnet's range.")
    gpu_networks: Literal["auto", "none"] = Field(
        "auto", description="auto: the extra VPCs the GPU family needs (A3 Mega: 8 VPCs; "
                            "A3 Ultra, A4: one RoCE VPC with 8 subnets); none: system VPC only.")
    gpu_subnets_cidr: Cidr = Field(
        "10.128.0.0/16", description="Range split evenly into the GPU networks' subnets.")
    nat: bool = Field(True, description="Cloud NAT for egress; nodes never get external IPs.")
    ssh_source_ranges: list[Cidr] = Field(
        default_factory=lambda: [catalog.IAP_RANGE],
        description="Sources allowed to reach SSH. Default: IAP TCP forwarding only; an empty "
                    "list creates no SSH firewall rule.")
    private_service_access: PrivateServiceAccess = Field(
        default_factory=PrivateServiceAccess,
        description="The range Filestore and Managed Lustre are reached through. Default: a "
                    "/20 that Google allocates.")
    peerings: list[Peering] = Field(default_factory=list, description="VPC peerings to add.")
    existing: str | None = Field(
        None, pattern=NETWORK_PATTERN,
        description="Use this network instead of creating one (needs `existing_subnetwork`).")
    existing_subnetwork: str | None = Field(
        None, pattern=SUBNETWORK_PATTERN,
        description="projects/P/regions/R/subnetworks/S used with `existing`.")


class FilestoreHome(Strict):
    """A Filestore instance exported as /home."""

    tier: catalog.FilestoreTier = Field("ZONAL", description="Filestore service tier.")
    capacity_gib: int = Field(1024, ge=1, description="Capacity in GiB; each tier has its own "
                                                      "range and step.")


class Home(Strict):
    """What is mounted at /home on every node: Filestore, or a listed Lustre entry."""

    filestore: FilestoreHome | None = Field(None, description="A new Filestore instance.")
    lustre: str | None = Field(None, description=f"The name of an entry of `storage.lustre`. "
                                                f"{REFERENCE_WORDS}")

    @property
    def uses_filestore(self) -> bool:
        """True when /home is the default or an explicit Filestore instance."""
        return self.lustre is None


def _default_home() -> Home:
    return Home(filestore=FilestoreHome())


class Lustre(Strict):
    """A Managed Lustre instance for scratch, in the cluster's zone and VPC."""

    name: str = Field(pattern=LIST_NAME_PATTERN, description="Suffix of the instance id.")
    filesystem: str = Field(pattern=LUSTRE_FILESYSTEM_PATTERN,
                            description="Lustre file system name: at most 8 letters and digits.")
    mount: str | None = Field(None, pattern=MOUNT_PATH_PATTERN, max_length=PATH_MAX_LENGTH,
                              description="Absolute mount path. Default /lustre/<name>; the "
                                          f"/home entry mounts at /home. {MOUNT_WORDS}")
    performance_tier: catalog.LustreThroughput = Field(
        500, description="Throughput in MB/s per TiB; fixed once created.")
    capacity_gib: int = Field(ge=1, description="Capacity in GiB; min, step and max follow "
                                                "the tier.")


class Bucket(Strict):
    """A Cloud Storage bucket mounted with Cloud Storage FUSE."""

    bucket: str = Field(pattern=BUCKET_PATTERN, description="Bucket name.")
    mount: str | None = Field(None, pattern=MOUNT_PATH_PATTERN, max_length=PATH_MAX_LENGTH,
                              description=f"Absolute mount path. Default /gcs/<bucket>. "
                                          f"{MOUNT_WORDS}")
    create: bool = Field(True, description="true: create the bucket; false: use an existing one.")

    @property
    def mount_path(self) -> str:
        """Where the bucket is mounted on the nodes."""
        return self.mount or f"/gcs/{self.bucket}"


class Storage(Strict):
    """Shared file systems: /home, Lustre scratch and bucket mounts."""

    home: Home = Field(default_factory=_default_home,
                       description="Default: Filestore ZONAL, 1024 GiB.")
    lustre: list[Lustre] = Field(
        default_factory=list,
        description="Managed Lustre instances, each mounted at /lustre/<name> unless `mount` "
                    "says otherwise. Default: none.")
    buckets: list[Bucket] = Field(
        default_factory=list,
        description="Cloud Storage buckets mounted with Cloud Storage FUSE, at /gcs/<bucket> "
                    "unless `mount` says otherwise. Default: none.")
    protect: bool = Field(True, description="Data-bearing resources refuse deletion.")


class Controller(Strict):
    """The Slurm controller VM."""

    machine_type: str = Field(
        "c2-standard-8", pattern=MACHINE_TYPE_PATTERN,
        description="Machine type of the controller VM, which runs slurmctld and, with "
                    "accounting on, slurmdbd. Default c2-standard-8.")
    machine_type_unlisted: MachineTypeUnlisted = False
    disk_size_gb: int = Field(
        100, ge=50, le=65536,
        description="Boot disk size of the controller VM in GB, 50 to 65536 (default 100). "
                    "Slurm's state and the accounting database live on a separate state "
                    "disk.")


class Login(Strict):
    """Login nodes users SSH into (through IAP) to submit jobs."""

    count: int = Field(1, ge=0, le=16,
                       description="How many login VMs, 0 to 16 (default 1); a managed "
                                   "cluster needs at least 1.")
    machine_type: str = Field("n2-standard-4", pattern=MACHINE_TYPE_PATTERN,
                              description="Machine type of each login VM. Default "
                                          "n2-standard-4.")
    machine_type_unlisted: MachineTypeUnlisted = False


class BootDisk(Strict):
    """A nodeset's boot disk."""

    type: Literal["pd-standard", "pd-balanced", "pd-ssd", "hyperdisk-balanced"] | None = Field(
        None, description="Default pd-balanced, or hyperdisk-balanced where the family needs it.")
    size_gb: int = Field(200, ge=50, le=65536,
                         description="Boot disk size in GB, 50 to 65536 (default 200).")


class Image(Strict):
    """A boot image the blueprint names instead of clusterprint's built one: an exact image
    (``name``, pinned) or, only where the blueprint says so, the newest of a ``family``."""

    project: str = Field(pattern=PROJECT_PATTERN, description="The project that holds the image.")
    name: str | None = Field(None, pattern=IMAGE_FAMILY_PATTERN,
                             description="An exact image: every VM boots these very bytes. "
                                         "Give name or family, not both.")
    family: str | None = Field(None, pattern=IMAGE_FAMILY_PATTERN,
                               description="An image family: VMs boot its newest image that is "
                                           "not deprecated, which must match the machine's CPU "
                                           "architecture (arm64 for A4X).")
    install_at_boot: bool = Field(
        False, description="Install at boot what the image lacks of what the node needs "
                           "(slow, from the internet); without it such a node fails its boot "
                           "naming what is missing.")


Provisioning = Literal["on-demand", "spot", "flex-start", "reservation"]


class Nodeset(Strict):
    """A group of identical compute VMs: one instance template and one instance group."""

    name: str = Field(pattern=LIST_NAME_PATTERN, description="Also the Slurm node feature.")
    machine_type: str = Field(
        pattern=MACHINE_TYPE_PATTERN,
        description="Machine type of every VM in the nodeset, e.g. a3-megagpu-8g or "
                    "n2-standard-4; a GPU machine type brings its GPUs, GPU NICs and GPU "
                    "networks.")
    machine_type_unlisted: MachineTypeUnlisted = False
    count: int = Field(ge=0, le=16384, description="Nodes kept up (static).")
    max_count: int | None = Field(
        None, ge=1, le=16384,
        description="Upper bound for the nodeset's nodes (Slurm's MaxNodeCount counts it). On "
                    "a nodeset with `power_saving` (the default but on reservation nodesets) "
                    "the nodes above `count` are elastic: Slurm creates their VMs when jobs "
                    "need them (on flex-start, one resize request per resume) and deletes "
                    "them after `suspend_time_s` idle. Without it it is a ceiling: resize "
                    "the instance group up to it and the extra VMs join Slurm on their own. "
                    "Default `count`.")
    provisioning: Provisioning = Field(
        "on-demand",
        description="How Compute Engine supplies the VMs: on-demand (the default); spot "
                    "(cheaper, but Compute Engine may reclaim them at any time); flex-start "
                    "(Dynamic Workload Scheduler: the VMs come when capacity is found and run "
                    "at most 7 days); reservation (they consume the one named in "
                    "`reservation`).")
    reservation: str | None = Field(
        None, pattern=RESERVATION_PATTERN,
        description="[projects/P/reservations/]NAME[/reservationBlocks/B[/reservationSubBlocks/S]]"
                    "; only with provisioning reservation.")
    reservation_bound: bool = Field(
        False,
        description="true for a dense (AI Hypercomputer) or calendar-mode reservation: its VMs "
                    "use the RESERVATION_BOUND provisioning model and are deleted when the "
                    "reservation ends. Only with provisioning reservation.")
    placement: Literal["compact", "none"] = Field(
        "none", description="compact: a placement policy keeps the nodes close. Not with a "
                            "reservation: reserved VMs are placed by the reservation (its own "
                            "compact policy, or the block or sub-block named).")
    boot_disk: BootDisk = Field(
        default_factory=BootDisk,
        description="Type and size of each VM's boot disk. Default: pd-balanced (or "
                    "hyperdisk-balanced where the machine family needs it), 200 GB.")
    image: Image | None = Field(None, description="Default: the clusterprint Slurm image.")
    power_saving: bool | None = Field(
        None,
        description="true: the nodes between `count` and `max_count` are elastic (Slurm's "
                    "power saving creates their VMs for jobs and deletes them idle). false: "
                    "`max_count` is only a ceiling. Default: true, but false on reservation "
                    "nodesets (a reservation bills whether its VMs run or not; set true to "
                    "share one with other work).")
    suspend_time_s: int = Field(
        300, ge=10, le=7 * 24 * 3600,
        description="Seconds an elastic node (one between count and max_count, with "
                    "`power_saving`) stays idle before Slurm powers it down and its VM is "
                    "deleted. Static nodes (count) are never powered down.")
    maintenance_reservations: bool = Field(
        True,
        description="true: a host maintenance window Compute Engine announces for one of the "
                    "nodeset's VMs (and a flex-start or reservation-bound VM's end of run) "
                    "becomes a Slurm maintenance reservation on that node, so no job starts "
                    "there that the event would kill. false: jobs are scheduled up to the "
                    "event.")

    @property
    def upper_bound(self) -> int:
        """The most nodes this nodeset can hold: Slurm sizes MaxNodeCount from it."""
        return self.max_count if self.max_count is not None else self.count

    @property
    def power_saved(self) -> bool:
        """``power_saving`` as set, else on for every provisioning but a reservation's."""
        if self.power_saving is not None:
            return self.power_saving
        return self.provisioning != "reservation"

    @property
    def elastic(self) -> int:
        """The nodes Slurm creates when jobs need them and deletes when idle (power
        saving): those above ``count`` where ``power_saved``; elsewhere ``max_count``
        stays a ceiling an operator resizes up to."""
        return self.upper_bound - self.count if self.power_saved else 0

    @property
    def elastic_groups(self) -> int:
        """The groups that hold the elastic nodes' VMs: power saving creates and deletes
        them by name, so Pulumi never sets these groups' size (a refresh would shrink them
        under running jobs)."""
        return -(-self.elastic // catalog.GROUP_VMS_MAX)

    @property
    def group_counts(self) -> list[int]:
        """The VMs kept in each of the nodeset's instance groups, in order.

        A zonal group holds at most ``catalog.GROUP_VMS_MAX`` VMs, so a nodeset has one
        group per that many nodes of its upper bound (room for every node it may hold, at
        least one group), all with the nodeset's VM names; its ``count`` fills them in
        order, so up to the limit there is one group, as there always was. Elastic nodes
        have groups of their own (``elastic_groups``): these hold the static nodes only.
        """
        limit = catalog.GROUP_VMS_MAX
        held = self.count if self.elastic else self.upper_bound
        groups = max(1, -(-held // limit))
        return [max(0, min(limit, self.count - index * limit)) for index in range(groups)]

    @property
    def compact_policy(self) -> bool:
        """Whether clusterprint makes the nodeset a compact placement policy: a reservation
        places its own VMs and refuses one (rule slurm.reservation-placement)."""
        return self.placement == "compact" and self.provisioning != "reservation"

    @property
    def gpus(self) -> int:
        """GPUs per node (0 for CPU machines)."""
        return machines.gpu_count(self.machine_type)

    @property
    def boot_disk_type(self) -> str:
        """The boot disk type actually used."""
        return self.boot_disk.type or machines.boot_disk_type(self.machine_type)


class Partition(Strict):
    """A Slurm partition over one or more nodesets."""

    name: str = Field(pattern=PARTITION_NAME_PATTERN,
                      description="The Slurm partition name jobs ask for (`sbatch -p NAME`).")
    nodesets: list[str] = Field(min_length=1, description=f"Names of `slurm.nodesets` "
                                                          f"entries. {REFERENCE_WORDS}")
    default: bool | None = Field(None, description="Default partition; the first one when "
                                                   "none is marked.")
    max_time: str | None = Field(
        None, pattern=SLURM_TIME_PATTERN,
        description="Slurm time limit, e.g. 7-00:00:00: 1 minute up to 24855-03:13:00, or "
                    "UNLIMITED (the default).")
    default_time: str | None = Field(
        None, pattern=SLURM_TIME_PATTERN,
        description="Time limit of a job that sets none, e.g. 4:00:00: 1 minute up to "
                    "max_time. Defaults to max_time; a shorter one lets backfill start "
                    "untimed jobs in gaps.")


class HealthChecks(Strict):
    """GPU health checks that drain, reboot or replace a failing node."""

    gpu: Literal["off", "quick", "thorough"] = Field(
        "quick", description="quick: GPU count, ECC, row remap, NVLink and Xid checks every "
                             "interval_s, and with DCGM level 1 before each job (a failure "
                             "drains the node and requeues the job); thorough: adds DCGM "
                             "level 2 after a failed job; off: no GPU check (disks, mounts "
                             "and the NIC are still checked every interval_s).")
    interval_s: int = Field(
        300, ge=0, le=65535,
        description="HealthCheckInterval: every node's check runs once per interval, the "
                    "nodes in turn; 0 disables it (the prolog and epilog still run). Slurm "
                    "reads it as a 16-bit number.")
    on_failure: Literal["drain", "reboot", "replace"] = Field(
        "drain", description="What the controller's remediation loop does with a node the check "
                             "drained: drain leaves it drained; reboot resets its VM (scontrol "
                             "reboot); replace recreates its VM once its jobs end.")
    max_remediation_share: float = Field(
        0.1, gt=0, le=1,
        description="The most of a nodeset rebooted or replaced in any hour, as a share of its "
                    "nodes (rounded down, at least one node); the rest stay drained and wait.")


class CloudSql(Strict):
    """An existing Cloud SQL for MySQL instance that holds the accounting database.

    It must have a private IP on the cluster's network and a user ``slurm`` whose password
    is the version you add to the cluster's database secret (the controller never invents
    one for an instance it does not own).
    """

    instance: str = Field(
        pattern=CLOUD_SQL_INSTANCE_PATTERN,
        description="projects/P/instances/I, or the connection name P:REGION:I.")
    database: str = Field("slurm_acct_db", pattern=SQL_DATABASE_PATTERN,
                          description="The database slurmdbd keeps its tables in.")

    @property
    def project(self) -> str:
        """The instance's project, whichever way it is named."""
        return self.instance.removeprefix("projects/").split("/")[0].split(":")[0]

    @property
    def name(self) -> str:
        """The instance's own name (what ``gcloud sql instances describe`` takes)."""
        return self.instance.rsplit("/", 1)[-1].rsplit(":", 1)[-1]

    @property
    def region(self) -> str | None:
        """The region a connection name states; None for a resource name."""
        parts = self.instance.split(":")
        return parts[1] if len(parts) == 3 else None


class Accounting(Strict):
    """Job accounting (sacct): slurmdbd on the controller, recording every job and its TRES."""

    enabled: bool = Field(True, description="false: no slurmdbd, no database, no sacct records.")
    cloud_sql: CloudSql | None = Field(
        None, description="Keep the database in this Cloud SQL instance; default: MariaDB on "
                          "the controller's state disk.")


class Slurm(Strict):
    """The Slurm cluster: controller, login nodes, nodesets and partitions."""

    controller: Controller = Field(
        default_factory=Controller,
        description="The controller VM. Default: c2-standard-8 with a 100 GB boot disk.")
    login: Login = Field(default_factory=Login,
                         description="The login VMs. Default: one n2-standard-4.")
    nodesets: list[Nodeset] = Field(
        min_length=1, description="Groups of identical compute VMs; at least one.")
    partitions: list[Partition] = Field(
        min_length=1,
        description="Slurm partitions over the nodesets; at least one. Jobs that name none "
                    "go to the one marked `default`, else the first.")
    health_checks: HealthChecks = Field(
        default_factory=HealthChecks,
        description="GPU health checks and what happens to a failing node. Default: quick "
                    "checks every 300 s; a failing node is drained.")
    accounting: Accounting = Field(
        default_factory=Accounting,
        description="Job accounting for sacct. Default: on, slurmdbd with MariaDB on the "
                    "controller.")

    @property
    def default_partition(self) -> Partition:
        """The partition jobs land in without ``-p``: the marked one, else the first."""
        return next((p for p in self.partitions if p.default), self.partitions[0])

    def nodeset(self, name: str) -> Nodeset | None:
        """The nodeset called ``name``, if listed."""
        return next((n for n in self.nodesets if n.name == name), None)


class RecipeJob(Strict):
    """A training job from the recipe catalog, staged onto the login node."""

    name: catalog.RecipeName = Field(
        description="A recipe of the catalog: Llama 3 8B or 70B pretraining, Gemma "
                    "supervised fine-tuning (gemma-2b, gemma-7b, gemma3-1b) or GRPO "
                    "reinforcement learning (gemma-2b, gemma3-1b, gemma3-27b).")
    partition: str = Field(description=f"The name of the `slurm.partitions` entry it is "
                                       f"submitted to. {REFERENCE_WORDS}")
    nodes: int = Field(1, ge=1, le=16384,
                       description="Nodes the job runs on (default 1); the partition must "
                                   "hold that many with the GPUs the recipe needs.")
    data_path: str | None = Field(
        None, pattern=NODE_PATH_PATTERN, max_length=PATH_MAX_LENGTH,
        description="Pretraining only: a Megatron indexed dataset's path prefix on a shared "
                    "mount (Lustre or a bucket; `<prefix>.bin` and `<prefix>.idx`) instead of "
                    "mock data. Limited by its pattern to an absolute path of letters, digits, "
                    f"`.`, `_`, `-` and `/`, no `..`, at most {PATH_MAX_LENGTH} characters: "
                    "every job of the recipe has it on its command line and in its container "
                    "mounts.")


class Observability(Strict):
    """Where training runs report to."""

    tensorboard: bool = Field(False, description="A Vertex AI TensorBoard instance in `region`.")
    dashboard: bool = Field(False, description="A Cloud Monitoring dashboard for the cluster.")
    alert_emails: list[Annotated[str, Field(pattern=EMAIL_PATTERN, max_length=254)]] = Field(
        default_factory=list, max_length=ALERT_EMAILS_MAX,
        description="Email addresses the cluster's alert policies notify (one Cloud "
                    "Monitoring email channel each). The policies (remediation protected, a "
                    "nodeset's drained share, the controller down) exist without any; they "
                    "then show in the console only.",
        examples=[["oncall@example.com"]])


class Security(Strict):
    """Who on the cluster's nodes may act with the nodes' own credentials."""

    users_get_node_credentials: bool = Field(
        False,
        description="true: every process on login and compute nodes, users' jobs too, may "
                    "ask the metadata server for the node's access token, which reads the "
                    "munge key (and so runs jobs as root). For single-user clusters only; "
                    "default false: only root may.")


class Blueprint(Strict):
    """One Slurm training cluster in one zone: clusterprint's main interface."""

    model_config = ConfigDict(
        title="clusterprint blueprint v1", populate_by_name=True,
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema",
                           "$id": "https://clusterprint.dev/schemas/blueprint.schema.json"})

    api_version: Literal["clusterprint/v1"] = Field(
        alias="apiVersion", description="The blueprint format: clusterprint/v1.")
    kind: Literal["TrainingCluster"] = Field(
        description="What the file describes: a TrainingCluster.")
    name: str = Field(pattern=NAME_PATTERN,
                      description="Prefixes every resource; the Slurm ClusterName.")
    labels: dict[Annotated[str, Field(pattern=LABEL_KEY_PATTERN)],
                 Annotated[str, Field(pattern=LABEL_VALUE_PATTERN)]] = Field(
        default_factory=dict, max_length=catalog.MAX_LABELS - len(naming.OWN_LABELS),
        description=f"GCE labels on every resource: at most "
                    f"{catalog.MAX_LABELS - len(naming.OWN_LABELS)}, as GCE allows "
                    f"{catalog.MAX_LABELS} and clusterprint adds {', '.join(naming.OWN_LABELS)}; "
                    f"keys starting {naming.RESERVED_LABEL_PREFIX} are clusterprint's.",
        # Without it, JSON Schema lets keys that miss the key pattern through unchecked.
        json_schema_extra={"additionalProperties": False})
    project: str | None = Field(None, pattern=PROJECT_PATTERN,
                                description="Default: the stack's gcp:project.")
    region: str = Field(pattern=REGION_PATTERN,
                        description="The Google Cloud region, e.g. us-central1, of the "
                                    "subnets, Cloud NAT and every regional part.")
    zone: str = Field(pattern=ZONE_PATTERN, description="The one zone of every zonal part; "
                                                       "must lie in `region`.")
    zone_unlisted: bool = Field(
        False,
        description="true: `zone` offers the blueprint's machine types though clusterprint's "
                    "catalog of zones does not list them there (the zone or the type is newer "
                    "than the catalog), so validate only warns.")
    orchestrator: Literal["self-managed", "managed"] = Field(
        "self-managed", description="self-managed: Slurm on Compute Engine; managed: the "
                                    "Cluster Director API.")
    network: Network = Field(
        default_factory=Network,
        description="The system VPC, the GPU VPCs and egress; every key has a default.")
    storage: Storage = Field(
        default_factory=Storage,
        description="Shared file systems: /home (default: a 1024 GiB ZONAL Filestore), "
                    "Lustre scratch and bucket mounts.")
    slurm: Slurm = Field(description="The Slurm cluster: controller, login nodes, nodesets "
                                     "of compute VMs and partitions.")
    recipes: list[RecipeJob] = Field(
        default_factory=list,
        description="Training jobs from the recipe catalog, staged onto the login node. "
                    "Default: none.")
    observability: Observability = Field(
        default_factory=Observability,
        description="Where training runs report to: a Vertex AI TensorBoard and a Cloud "
                    "Monitoring dashboard, both off by default.")
    security: Security = Field(
        default_factory=Security,
        description="Who may use the nodes' credentials: by default only root on login and "
                    "compute nodes.")

    @property
    def mtu(self) -> int:
        """The system VPC's MTU: the file's, else the GPU family's recommendation."""
        if self.network.mtu is not None:
            return self.network.mtu
        return machines.recommended_mtu([n.machine_type for n in self.slurm.nodesets])

    def lustre(self, name: str) -> Lustre | None:
        """The Lustre entry called ``name``, if listed."""
        return next((x for x in self.storage.lustre if x.name == name), None)

    def mount_of(self, lustre: Lustre) -> str:
        """Where a Lustre entry is mounted on the nodes."""
        if self.storage.home.lustre == lustre.name:
            return "/home"
        return lustre.mount or f"/lustre/{lustre.name}"
