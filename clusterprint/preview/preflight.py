"""Check a project against a blueprint's plan before anything is created.

What a failed ``pulumi up`` would find out an hour in, asked of the APIs first, once Resource
Manager has shown the project exists and the credentials see it: the APIs the
plan's resource types need are enabled (facts/prerequisites.py), the deployer holds the
permissions of the roles those types need, the region's Compute quota covers the VMs and disks
(preview/quota_needs.py), the zone offers each machine type, each named reservation exists in
the zone, shared with the project where another project owns it, with the machine type, the
free count and the reservation-bound model the nodesets need, and each image the VMs boot
exists or will be built by ``pulumi up`` from a base image that exists.

The permissions are asked with Resource Manager's ``projects.testIamPermissions``, not read
from ``getIamPolicy``: it answers for the caller however the permission reaches them (a
group, a folder or organization grant, a custom role), and needs no right to read the
project's policy, which a deployer often lacks.

Every check collects its problems; a check whose API answers an error (403, 404, nothing,
a body that is not the API's JSON) is itself a problem with its fix, never a pass, and a
field of the wrong shape reads as absent. A failure that is not the call's but the run's
stops it instead (CannotRun): refused credentials fail every call alike, an API that does not
answer makes every call wait out its retries (2 + 4 + 8 s each: minutes for a run), and a
project that is not there or not visible fails each call in a way that reads as something
else (a zone that does not offer a machine type); a line per call would bury the one fix.
Where the Service Usage answer says an API is disabled, the checks that call that API are
left out: the API's own line says what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from clusterprint.blueprint.model import reservation_owner
from clusterprint.build.compute import (
    ATTEMPTS,
    ComputeError,
    CredentialsRefused,
    NoAnswer,
    number_of,
    object_of,
)
from clusterprint.facts import machines, prerequisites
from clusterprint.preview.quota_needs import Need, planned_disks, planned_vms, quota_needs
from clusterprint.render import images

if TYPE_CHECKING:
    from clusterprint.blueprint.model import Blueprint, Nodeset
    from clusterprint.build.compute import ComputeApi
    from clusterprint.build.project_apis import ResourceManagerApi, ServiceUsageApi
    from clusterprint.preview.plan import Plan

COMPUTE_API = "compute.googleapis.com"
RESOURCE_MANAGER_API = "cloudresourcemanager.googleapis.com"
SERVICE_USAGE_API = "serviceusage.googleapis.com"
#: What an API's 403 says where it bills user credentials' requests to a quota project and
#: they name none ("Your application is authenticating by using local Application Default
#: Credentials. The X API requires a quota project, which is not set by default."; its
#: ErrorInfo reason is SERVICE_DISABLED, though no API is disabled: as quoted in
#: GoogleCloudPlatform/cloud-foundation-fabric#2622 and googleapis/google-auth-library-python
#: #1459). Every call to that API fails alike.
QUOTA_PROJECT_MISSING = "requires a quota project"
#: The fix of a call the API throttled: it limits how fast a project may ask it.
RATE_LIMITED = ("wait a minute, then run preflight again: the API limits how fast a project "
                "may ask it")
#: Where a quota is raised.
QUOTAS_PAGE = "https://console.cloud.google.com/iam-admin/quotas?project={project}"
#: Reservations whose VMs must use the reservation-bound provisioning model: dense ones
#: (Reservation.deploymentType DENSE) and calendar-mode ones (cloud.google.com/compute/docs/
#: instances/about-reservation-bound-vms). Only the first shows on the Reservation: calendar
#: mode is a field of the FutureReservation it came from (``reservationMode``), which the v1
#: Reservation lacks.
DENSE = "DENSE"


class CannotRun(Exception):
    """What leaves preflight nothing true to say of the project; the message is the one line
    the command prints, with what to do."""


@dataclass(frozen=True)
class Problem:
    """One thing the project lacks, and how to fix it."""

    check: Literal["api", "permission", "quota", "machine-type", "reservation", "image"]
    subject: str
    message: str
    fix: str
    severity: Literal["error", "warning"] = "error"

    def line(self) -> str:
        """``error: quota: N2_CPUS: ... (fix: ...)``."""
        return f"{self.severity}: {self.check}: {self.subject}: {self.message} (fix: {self.fix})"

    def as_json(self) -> dict[str, str]:
        """The problem as ``preflight --json`` lists it."""
        return {"severity": self.severity, "check": self.check, "subject": self.subject,
                "message": self.message, "fix": self.fix}


@dataclass
class ProjectApis:
    """The clients of one project; ``compute_of`` gives another project's Compute (a shared
    reservation's owner, a public image's publisher)."""

    project: str
    compute: ComputeApi
    service_usage: ServiceUsageApi
    resource_manager: ResourceManagerApi
    compute_of: Callable[[str], ComputeApi]
    #: Who a role is granted to in a fix: the credentials' service account where they are
    #: one, else the user, whose address the credentials do not carry.
    member: str = "user:YOUR_EMAIL"


def preflight(blueprint: Blueprint, plan: Plan, apis: ProjectApis) -> list[Problem]:
    """Every problem the project has with this plan, in the order of the checks."""
    types = [r.type for r in plan.resources]
    problems = check_project(apis)
    found, disabled = check_apis(prerequisites.required_apis(types), apis)
    problems += found
    if RESOURCE_MANAGER_API not in disabled:
        problems += check_permissions(prerequisites.deployer_permissions(types), apis)
    if COMPUTE_API not in disabled:
        problems += check_compute(blueprint, plan, apis)
    return problems


def check_project(apis: ProjectApis) -> list[Problem]:
    """CannotRun where the project does not exist or the credentials cannot see it: Resource
    Manager's projects.get answers 403 for both alike (and 404 is read the same), so the line
    names both. A 403 that says Resource Manager is disabled says nothing of the project: the
    api check, or the permissions' own call, says what to enable."""
    project = apis.project
    try:
        apis.resource_manager.project_info()
    except ComputeError as exc:
        _stop_if_run_failed(exc, RESOURCE_MANAGER_API, project)
        if _service_disabled(exc):
            return []
        if exc.status in (403, 404):
            raise CannotRun(
                f"project {project} does not exist or these credentials cannot see it "
                f"({exc}); check the project id (--project, or `project` in the blueprint), "
                "or have these credentials granted a role on it with "
                "resourcemanager.projects.get (roles/browser is the least)") from None
        return [unreadable("api", RESOURCE_MANAGER_API, f"project {project}", exc, project,
                           RESOURCE_MANAGER_API)]
    return []


def check_apis(required: list[str], apis: ProjectApis) -> tuple[list[Problem], set[str]]:
    """A line per required API the project has not enabled, and those APIs."""
    project = apis.project
    try:
        states = apis.service_usage.states(required)
    except ComputeError as exc:
        return [unreadable("api", SERVICE_USAGE_API, "the APIs' states", exc, project,
                           SERVICE_USAGE_API)], set()
    disabled = [api for api in required if states.get(api) != "ENABLED"]
    return [Problem("api", api, f"not enabled in project {project}",
                    f"gcloud services enable {api} --project {project}")
            for api in disabled], set(disabled)


def check_permissions(needed: dict[str, str], apis: ProjectApis) -> list[Problem]:
    """A line per role of which the deployer lacks a permission ``pulumi up`` uses."""
    project = apis.project
    try:
        held = apis.resource_manager.held_permissions(sorted(needed))
    except ComputeError as exc:
        return [unreadable("permission", RESOURCE_MANAGER_API, "the deployer's permissions",
                           exc, project, RESOURCE_MANAGER_API)]
    lacking: dict[str, list[str]] = {}
    for permission, role in sorted(needed.items()):
        if permission not in held:
            lacking.setdefault(role, []).append(permission)
    return [Problem("permission", role, f"the deployer lacks {', '.join(missing)}",
                    f"gcloud projects add-iam-policy-binding {project} "
                    f"--member={apis.member} --role={role}")
            for role, missing in sorted(lacking.items())]


def check_compute(blueprint: Blueprint, plan: Plan, apis: ProjectApis) -> list[Problem]:
    """Machine types in the zone, quota in the region, reservations, images."""
    problems: list[Problem] = []
    vms = planned_vms(blueprint, plan)
    cpus = _guest_cpus(sorted({v.machine_type for v in vms}), blueprint.zone, apis, problems)
    needs = quota_needs(vms, planned_disks(plan), cpus.get)
    problems += check_quota(needs, blueprint.region, apis)
    problems += check_reservations(blueprint, apis)
    problems += check_images(blueprint, apis)
    return problems


def _guest_cpus(machine_types: list[str], zone: str, apis: ProjectApis,
                problems: list[Problem]) -> dict[str, int]:
    """Each machine type's vCPUs in ``zone``; a problem for one the zone does not offer."""
    found: dict[str, int] = {}
    for machine_type in machine_types:
        answer = _read(apis.compute.machine_type, (zone, machine_type), problems,
                       "machine-type", machine_type, f"machine type {machine_type} in {zone}",
                       apis.project)
        if answer is UNREAD:
            continue
        if answer is None:
            problems.append(Problem(
                "machine-type", machine_type, f"zone {zone} does not offer it",
                f"choose a zone that does: gcloud compute machine-types list "
                f"--filter=name={machine_type} --project {apis.project}"))
            continue
        vcpus = number_of(answer.get("guestCpus"))
        if vcpus is None:
            problems.append(Problem(
                "machine-type", machine_type, f"zone {zone} answered no vCPU count for it, so "
                "its vCPU quota is not checked", "run preflight again; if it persists, check "
                f"the quota by hand: {QUOTAS_PAGE.format(project=apis.project)}", "warning"))
        else:
            found[machine_type] = int(vcpus)
    return found


def check_quota(needs: list[Need], region: str, apis: ProjectApis) -> list[Problem]:
    """A line per metric whose free quota does not cover what the plan takes at once (an
    error) or at most, with every elastic node up (a warning). The project-wide vCPU and GPU
    quotas are read from the project, the others from the region; a metric neither lists cannot be
    checked (a warning: the API lists only some metrics, newer ones not always, and the
    Cluster Toolkit skips them likewise)."""
    project, problems = apis.project, []
    answer = _read(apis.compute.region, (region,), problems, "quota", region,
                   f"region {region}'s quotas", project)
    if answer is UNREAD:
        return problems
    if answer is None:
        return [Problem("quota", region, f"project {project} has no region {region}",
                        "set `region` to a Compute Engine region")]
    quotas = _quotas_by_metric(answer)
    if any(need.metric in machines.PROJECT_QUOTAS for need in needs):
        info = _read(apis.compute.project_info, (), problems, "quota", project,
                     f"project {project}'s quotas", project)
        if info is not UNREAD:
            quotas.update({metric: q for metric, q in _quotas_by_metric(info).items()
                           if metric in machines.PROJECT_QUOTAS})
    for metric, count, max_count, who in _by_metric_used(needs, quotas):
        where = "all regions" if metric in machines.PROJECT_QUOTAS else region
        fix = f"request more {metric} in {where}: {QUOTAS_PAGE.format(project=project)}"
        limit, free = _limit_and_free(quotas.get(metric))
        if limit is None:
            planned = f"{count}" + (f" at once, {max_count} with every elastic node up"
                                    if max_count > count else "")
            problems.append(Problem(
                "quota", metric, f"project {project} lists no quota {metric} in {where}, so "
                f"the plan's {planned} ({who}) cannot be checked",
                f"look it up on {QUOTAS_PAGE.format(project=project)}", "warning"))
        elif limit < 0:  # unlimited
            continue
        elif count > free:
            problems.append(Problem("quota", metric, f"the plan needs {count} in {where}, "
                                    f"{_number(free)} of {_number(limit)} are "
                                    f"free ({who})", fix))
        elif max_count > free:
            problems.append(Problem("quota", metric, f"every elastic node up needs "
                                    f"{max_count} in {where}, {_number(free)} are free "
                                    f"({who}): nodes above that fail to start", fix, "warning"))
    return problems


def _quotas_by_metric(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A region's or project's ``quotas`` by metric; an entry that is not an object with a
    metric is left out (its metric then reads as not listed, a warning)."""
    entries = answer.get("quotas")
    if not isinstance(entries, list):
        return {}
    return {str(q["metric"]): q for q in entries if isinstance(q, dict) and q.get("metric")}


def _limit_and_free(granted: dict[str, Any] | None) -> tuple[float | None, float]:
    """A quota's limit (None where it is not listed or not a number; below 0 where it has
    none) and what of it is free, never below 0 (usage can pass a limit lowered since). The
    API leaves out a usage of 0."""
    if granted is None:
        return None, 0
    limit, usage = number_of(granted.get("limit") or 0), number_of(granted.get("usage") or 0)
    if limit is None or usage is None:
        return None, 0
    return limit, max(limit - usage, 0)


def _by_metric_used(needs: list[Need], quotas: dict[Any, dict]
                    ) -> list[tuple[str, int, int, str]]:
    """The needs summed by the metric each really draws on: a preemptible one where the
    region grants it (its limit above 0, or none at all), else the regular one, which
    regular VMs share."""
    totals: dict[str, tuple[int, int, list[str]]] = {}
    for need in needs:
        metric = need.metric
        if need.preemptible and _limit_and_free(quotas.get(need.preemptible))[0]:
            metric = need.preemptible
        count, max_count, who = totals.get(metric, (0, 0, []))
        totals[metric] = (count + need.count, max_count + need.max_count,
                          who + [w for w in need.who if w not in who])
    return [(metric, count, max_count, ", ".join(who))
            for metric, (count, max_count, who) in sorted(totals.items())]


def check_reservations(blueprint: Blueprint, apis: ProjectApis) -> list[Problem]:
    """A line per problem of each named reservation, for all the nodesets that consume it."""
    users: dict[tuple[str, str], list[Nodeset]] = {}
    for nodeset in blueprint.slurm.nodesets:
        if nodeset.provisioning == "reservation" and nodeset.reservation:
            users.setdefault(reservation_owner(nodeset.reservation, apis.project),
                             []).append(nodeset)
    problems = []
    for (owner, name), nodesets in users.items():
        problems += _reservation_problems(owner, name, nodesets, blueprint.zone, apis)
    return problems


def _reservation_problems(owner: str, name: str, nodesets: list[Nodeset], zone: str,
                          apis: ProjectApis) -> list[Problem]:
    """The problems of one reservation for the nodesets that name it."""
    subject = f"projects/{owner}/zones/{zone}/reservations/{name}"
    problems: list[Problem] = []
    answer = _read(apis.compute_of(owner).reservation, (zone, name), problems,
                   "reservation", subject, f"reservation {name}", owner)
    if answer is UNREAD:
        return problems
    names = ", ".join(f"nodeset {ns.name}" for ns in nodesets)
    if answer is None:
        return [Problem("reservation", subject, f"no such reservation in {zone} ({names})",
                        f"create it in {zone}, or name one of `gcloud compute reservations "
                        f"list --project {owner}` in slurm.nodesets[].reservation")]
    problems += _status_problems(answer, subject)
    if owner != apis.project and not _shared_with(answer, apis.project):
        problems.append(Problem(
            "reservation", subject, f"it is not shared with project {apis.project} ({names})",
            f"gcloud compute reservations update {name} --zone {zone} "
            f"--add-share-with={apis.project} --project {owner}"))
    specific = object_of(answer.get("specificReservation"))
    problems += _machine_type_problems(specific, nodesets, subject)
    problems += _count_problems(specific, nodesets, subject, f"{name} --zone {zone}", owner)
    problems += _bound_problems(answer.get("deploymentType") == DENSE, nodesets, subject)
    return problems


#: Reservation statuses in which its VMs can be created: READY, and UPDATING while it is
#: resized (what a count problem's fix, ``reservations update --vm-count``, leaves a while).
USABLE_RESERVATION = "READY"
RESIZING_RESERVATION = "UPDATING"


def _status_problems(answer: dict[str, Any], subject: str) -> list[Problem]:
    """An error for a reservation not READY (being created or deleted), a warning for one
    being resized."""
    status = str(answer.get("status") or USABLE_RESERVATION)
    if status == USABLE_RESERVATION:
        return []
    if status == RESIZING_RESERVATION:
        return [Problem("reservation", subject, f"its status is {status}",
                        "run preflight again once it is READY", "warning")]
    return [Problem("reservation", subject, f"its status is {status}, not READY",
                    "wait until it is READY, or name another")]


def _shared_with(answer: dict[str, Any], project: str) -> bool:
    """Whether another project's reservation may be used by ``project``: False only where
    its shareSettings say so (LOCAL, or specific projects without it); sharing with an
    organization or folders, or no shareSettings, is not knowable from here."""
    settings = object_of(answer.get("shareSettings"))
    share_type = settings.get("shareType")
    if share_type == "LOCAL":
        return False
    if share_type == "SPECIFIC_PROJECTS":
        shared = object_of(settings.get("projectMap"))
        # keyed by project id, each with its projectId; either names the project
        return project in shared or any(object_of(config).get("projectId") == project
                                        for config in shared.values())
    return True


def _machine_type_problems(specific: dict[str, Any], nodesets: list[Nodeset],
                           subject: str) -> list[Problem]:
    """A line per nodeset whose machine type the reservation does not reserve; a warning
    where it reserves an instance template's, which is not read."""
    reserved = str(object_of(specific.get("instanceProperties")).get("machineType") or "")
    reserved = reserved.rsplit("/", 1)[-1]
    template = str(specific.get("sourceInstanceTemplate") or "")
    problems = []
    for ns in nodesets:
        if not reserved and template:
            problems.append(Problem(
                "reservation", subject, f"it reserves the machine type of instance template "
                f"{template}, which preflight does not read: nodeset {ns.name} is "
                f"{ns.machine_type}", f"check that the template's machine type is "
                f"{ns.machine_type}", "warning"))
        elif reserved != ns.machine_type:
            problems.append(Problem(
                "reservation", subject, f"it reserves {reserved or 'no machine type'}, nodeset "
                f"{ns.name} is {ns.machine_type}",
                f"set the nodeset's machine_type to {reserved}, or name a reservation of "
                f"{ns.machine_type}" if reserved else f"name a reservation of {ns.machine_type}"))
    return problems


def _count_problems(specific: dict[str, Any], nodesets: list[Nodeset], subject: str,
                    which: str, owner: str) -> list[Problem]:
    """An error where the reservation's free VMs do not cover the nodesets' ``count``, a
    warning where they do not cover every node up to ``max_count``; ``which`` is the
    reservation as gcloud names it (``NAME --zone ZONE``)."""
    total = int(number_of(specific.get("count") or 0) or 0)
    free = total - int(number_of(specific.get("inUseCount") or 0) or 0)
    names = ", ".join(f"nodeset {ns.name}" for ns in nodesets)
    wanted = sum(ns.count for ns in nodesets)
    most = sum(ns.upper_bound for ns in nodesets)
    grow = f"gcloud compute reservations update {which} --vm-count {{}} --project {owner}"
    if wanted > free:
        return [Problem(
            "reservation", subject, f"{free} of its {total} VMs are free, {names} want {wanted}",
            f"lower the nodesets' count to {max(free, 0)}, or grow it: "
            + grow.format(total + wanted - free))]
    if most > free:
        return [Problem(
            "reservation", subject, f"{free} of its {total} VMs are free, {names} grow to "
            f"{most} at most: nodes above {free} fail to start",
            "lower max_count, or grow it: " + grow.format(total + most - free), "warning")]
    return []


def _bound_problems(dense: bool, nodesets: list[Nodeset], subject: str) -> list[Problem]:
    """A dense reservation takes only reservation-bound VMs; reservation_bound on one that
    is not dense is refused unless it is calendar-mode, which its Reservation does not say."""
    problems = []
    for ns in nodesets:
        if dense and not ns.reservation_bound:
            problems.append(Problem(
                "reservation", subject, f"it is dense: its VMs must be reservation-bound, "
                f"nodeset {ns.name} is not", f"set reservation_bound: true on nodeset {ns.name}"))
        elif ns.reservation_bound and not dense:
            problems.append(Problem(
                "reservation", subject, f"nodeset {ns.name} is reservation_bound, but the "
                "reservation is not dense: its VMs are refused unless it is a calendar-mode "
                "reservation (which the Reservation resource does not say)",
                f"set reservation_bound: false on nodeset {ns.name} unless the reservation "
                "came from a calendar-mode future reservation", "warning"))
    return problems


def check_images(blueprint: Blueprint, apis: ProjectApis) -> list[Problem]:
    """A line per image the VMs boot that neither exists nor will be built: a nodeset's
    named image, or the base of an image ``pulumi up`` would build."""
    problems: list[Problem] = []
    for image in images.needed_images(blueprint):
        built = _read(apis.compute.image, (image.name,), problems, "image",
                      image.path(apis.project), f"image {image.name}", apis.project)
        if built is not None:  # there, or unread (a problem says so)
            continue
        base = image.base
        answer = _read(apis.compute_of(base.project).image, (base.name,), problems, "image",
                       base.path, f"image {base.path}", base.project)
        if answer is None:
            problems.append(Problem(
                "image", base.path, f"the base image of {image.name}, which `pulumi up` "
                "would build, is gone", "use a clusterprint whose facts/images.py names a "
                "base image that exists"))
        elif answer is not UNREAD:
            problems += _unusable(answer, base.path, f"the base image of {image.name}",
                                  "use a clusterprint whose facts/images.py names a base "
                                  "image that is current")
    for ns in blueprint.slurm.nodesets:
        named = ns.image
        if named is None:
            continue
        path = images.pinned_path(named)
        compute = apis.compute_of(named.project)
        read = compute.image if named.name is not None else compute.image_from_family
        answer = _read(read, (named.name or named.family,), problems, "image", path,
                       f"image {path}", named.project)
        fix = (f"build it, or fix slurm.nodesets[].image (gcloud compute images list "
               f"--project {named.project})")
        if answer is None:
            problems.append(Problem(
                "image", path, f"nodeset {ns.name} boots it, and it does not exist", fix))
        elif answer is not UNREAD:
            problems += _unusable(answer, path, f"nodeset {ns.name} boots it", fix)
    return problems


#: Image deprecation states (Image.deprecated.state) in which no VM can be created from it.
REFUSED_STATES = frozenset({"OBSOLETE", "DELETED"})


def _unusable(image: dict[str, Any], path: str, who: str, fix: str) -> list[Problem]:
    """A problem for an image that exists but that no VM can boot yet (status not READY)
    or any more (OBSOLETE, DELETED); a warning for one DEPRECATED (creates still work)."""
    deprecated = object_of(image.get("deprecated"))
    state = str(deprecated.get("state") or "")
    status = str(image.get("status") or "READY")
    if state in REFUSED_STATES:
        return [Problem("image", path, f"{who}, and it is {state}: no VM can be created "
                        "from it", fix)]
    if status != "READY":
        return [Problem("image", path, f"{who}, and its status is {status}, not READY", fix)]
    if state == "DEPRECATED":
        replacement = deprecated.get("replacement")
        return [Problem("image", path, f"{who}, and it is DEPRECATED"
                        + (f" (replaced by {replacement})" if replacement else ""),
                        fix, "warning")]
    return []


#: What _read answers for a call that got an error instead of an answer.
UNREAD: Any = object()


def _read(read: Callable[..., dict[str, Any] | None], args: tuple, problems: list[Problem],
          check: Any, subject: str, what: str, project: str) -> Any:
    """The Compute API's answer to ``read(*args)`` (None: not found), or UNREAD once a
    problem says why it could not be read."""
    try:
        return read(*args)
    except ComputeError as exc:
        problems.append(unreadable(check, subject, what, exc, project, COMPUTE_API))
        return UNREAD


def unreadable(check: Any, subject: str, what: str, exc: ComputeError, project: str,
               api: str) -> Problem:
    """The problem of a call to ``api`` that got no answer: its fix by what it got; CannotRun
    where what it got fails every call alike."""
    _stop_if_run_failed(exc, api, project)
    text = str(exc)
    if _service_disabled(exc):
        fix = f"gcloud services enable {api} --project {project}"
    elif exc.status == 403:
        fix = (f"grant the deployer a role that may read {what} in project {project} "
               "(roles/viewer holds them all)")
    elif exc.status == 404:
        fix = f"check that project {project} exists and the credentials can see it"
    elif exc.status == 429:  # a call asked once (a POST): the project's rate of requests
        fix = RATE_LIMITED
    elif exc.status < 400:  # no answer, or one that is not the API's (a proxy's page)
        fix = f"check this machine reaches {api} (a proxy or firewall in the way?)"
    else:
        fix = "run preflight again; if it persists, the API's status page may say why"
    return Problem(check, subject, f"could not read {what}: {text}", fix)


def _service_disabled(exc: ComputeError) -> bool:
    """Whether a 403 says the API is disabled (for the project, or the credentials' quota
    project), rather than that a permission is missing."""
    text = str(exc)
    return exc.status == 403 and ("SERVICE_DISABLED" in text or "has not been used" in text
                                  or "is disabled" in text)


def _stop_if_run_failed(exc: ComputeError, api: str, project: str) -> None:
    """CannotRun where a call's failure is every call's: the credentials refused or without
    the quota project an API bills user credentials' requests to, or ``api`` failing through
    all its retries (the first such call ends the run, so one outage costs one call's
    waits): throttled (429), failing (5xx) or not answering at all."""
    if isinstance(exc, CredentialsRefused):
        raise CannotRun(f"the Google credentials were refused ({exc}); run `gcloud auth "
                        "application-default login`") from None
    if exc.status == 403 and QUOTA_PROJECT_MISSING in str(exc):
        raise CannotRun(f"{api} needs a quota project for these user credentials ({exc}); "
                        f"run `gcloud auth application-default set-quota-project "
                        f"{project}`") from None
    if not isinstance(exc, NoAnswer):
        return
    if exc.status == 429:
        raise CannotRun(f"{api} limited this project's requests through {ATTEMPTS} tries "
                        f"({exc}); {RATE_LIMITED}") from None
    failed = "failed" if exc.status else "did not answer"
    raise CannotRun(f"{api} {failed} in {ATTEMPTS} tries ({exc}); run preflight again in a few "
                    f"minutes; if it persists, check that this machine reaches {api} and the "
                    "API's status page") from None


def _number(value: Any) -> str:
    number = float(value or 0)
    return str(int(number)) if number.is_integer() else str(number)
