"""Check the project for a blueprint before `pulumi up`: `clusterprint preflight FILE`.

With the deployer's own credentials (Application Default Credentials: `gcloud auth
application-default login`) and read-only calls, once Resource Manager shows the project
exists and the credentials see it, it asks what a failed deploy would find out an hour later:
the APIs the plan needs are enabled (Service Usage), the deployer holds the
permissions of the roles the plan needs (Resource Manager testIamPermissions), the zone
offers every machine type and the region's Compute quota covers the vCPUs, GPUs and disks
(spot and flex-start VMs: the preemptible quota where the region grants one) and the
project's CPUS_ALL_REGIONS and GPUS_ALL_REGIONS the vCPUs and GPUs, each named reservation
exists in the zone, shared with the project where another owns it, with the machine type,
enough free VMs and, for dense ones, reservation_bound, and every image the VMs boot exists
and is usable or `pulumi up` builds it from a base image that is. Filestore and Lustre
capacity quotas are not checked.
Run it before the first `pulumi up`: a deployed cluster's own VMs are in the quotas' usage
and the reservation's in-use count.

The project: --project, else the blueprint's, else the credentials'. CLUSTERPRINT_COMPUTE_API,
CLUSTERPRINT_SERVICE_USAGE_API and CLUSTERPRINT_RESOURCE_MANAGER_API, when set, are those
APIs' endpoints instead of Google's.

stdout has one line per problem, with its fix, every problem in one run:
  FILE: error: CHECK: SUBJECT: what is wrong (fix: what to run or change)
CHECK is api, permission, quota, machine-type, reservation or image. A warning (quota or a
reservation that covers the nodes kept up but not every elastic node, a quota metric the API
does not list, a deprecated image) prints the same way and does not fail.
An API that refuses or does not answer is a problem line too, never a pass. stderr ends
with `FILE: ok: project P is ready for pulumi up`, or the count of problems. --json prints
{"file", "project", "region", "zone", "ok", "problems": [{"severity", "check", "subject",
"message", "fix"}]} instead.

Exit status: 0 no errors (warnings allowed), 1 problems found or the blueprint is invalid
(validate's lines on stderr), 2 usage error, unreadable file, no project, no credentials,
credentials the APIs refuse, a project that does not exist or they cannot see, or an API
that did not answer any of one call's tries (one line on stderr, nothing on stdout, --json or
not).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from clusterprint.cli.commands import file_argument, project_argument
from clusterprint.cli.main import EXIT_USAGE

WHO = "clusterprint preflight"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """preflight FILE [--project P] [--json]."""
    parser.add_argument("file", metavar="FILE", type=file_argument,
                        help="blueprint file (.yaml or .json)")
    parser.add_argument("--project", metavar="P", type=project_argument,
                        help="the project to check (default: the blueprint's)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of lines")


def run(args: argparse.Namespace) -> int:
    """Check the blueprint, plan it offline, then ask the project."""
    from clusterprint.blueprint.findings import count_text
    from clusterprint.blueprint.validate import printable
    from clusterprint.cli.commands import checked_blueprint, session_and_project
    from clusterprint.preview.plan import plan_blueprint
    from clusterprint.preview.preflight import CannotRun, preflight

    blueprint, status = checked_blueprint(args.file)
    if blueprint is None:
        return status
    found = session_and_project(WHO, blueprint, args.project)
    if found is None:
        return EXIT_USAGE
    session, project = found
    try:
        problems = preflight(blueprint, plan_blueprint(blueprint),
                             project_apis(session, project))
    except CannotRun as exc:  # as without credentials: one line, and no run to report
        print(printable(f"{WHO}: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    errors = [p for p in problems if p.severity == "error"]
    if args.json:
        json.dump({"file": args.file, "project": project, "region": blueprint.region,
                   "zone": blueprint.zone, "ok": not errors,
                   "problems": [p.as_json() for p in problems]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for problem in problems:
            print(printable(f"{args.file}: {problem.line()}"))
        if not errors:
            print(printable(f"{args.file}: ok: project {project} is ready for pulumi up"),
                  file=sys.stderr)
        counted = count_text(problems)  # "2 errors, 1 warning", as validate counts
        if counted:
            print(counted, file=sys.stderr)
    return 1 if errors else 0


def project_apis(session, project: str, sleep: Callable[[float], None] = time.sleep):
    """The project's clients at their endpoints (Google's, or the variables'); ``sleep`` is
    how they wait between tries (a test's records the waits instead)."""
    from clusterprint.build.compute import ComputeApi, compute_url
    from clusterprint.build.project_apis import (
        ResourceManagerApi,
        ServiceUsageApi,
        resource_manager_url,
        service_usage_url,
    )
    from clusterprint.preview.preflight import ProjectApis

    others: dict[str, ComputeApi] = {}

    def compute_of(owner: str) -> ComputeApi:
        return others.setdefault(owner, ComputeApi(session, owner, compute_url(), sleep))

    account = getattr(getattr(session, "credentials", None), "service_account_email", None)
    return ProjectApis(project, compute_of(project),
                       ServiceUsageApi(session, project, service_usage_url(), sleep),
                       ResourceManagerApi(session, project, resource_manager_url(), sleep),
                       compute_of, **({"member": f"serviceAccount:{account}"}
                                      if isinstance(account, str) and "@" in account else {}))

