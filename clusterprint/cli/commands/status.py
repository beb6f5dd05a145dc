"""Show where a deployed cluster's VMs are: `clusterprint status FILE`.

With your own credentials (Application Default Credentials: `gcloud auth application-default
login`) and the Compute API only, no SSH: the controller, each login node and each nodeset,
as the instance groups and the VMs' boot scripts (their guest attributes) say.

  controller NAME: ready | booting (STEP) | failed at STEP | stopped (STATUS) | missing
  login NAME: the same
  nodeset N: W wanted, C created, B booting, R ready, F failed[; up to E more on demand[:
             C created, B booting, R ready, F failed]]
    NAME: booting (STEP) | failed at STEP, then the last lines of its boot's log
    NAME: being created[: CODE: message of its last try] | being deleted
    group G: CODE (xN, last TIME): message     (the group's listErrors: stockout, quota...)
    resize request R (group G): waiting for capacity: N VMs, asked TIME | failed: CODE: message
                                              (flex-start: the requests that wait or failed)

Ready VMs of a nodeset are counted, not listed. Elastic nodes (above `count`, up to
`max_count`) are created when jobs need them: they are not wanted until then, and counted
apart from the static VMs (a ready elastic VM never stands in for a static one). A VM its group
deletes (an idle elastic node) is neither created nor failed; one it recreates or restarts
boots (STEP is the group's action). A boot state the boot script does not write is shown
as it is, and the text form escapes what is not printable.
--json prints the same as one JSON object. --watch [SECONDS] redraws every SECONDS (default
30, at least 10: each VM answers 10 guest attribute reads a minute) until Ctrl-C; with --json
one object a line. The project: --project, else the blueprint's, else the credentials'.
CLUSTERPRINT_COMPUTE_API, when set, is the Compute API's endpoint instead of Google's.

Exit status: 0 every wanted VM is ready, 1 something needs you (a boot failed, a VM is
stopped, missing or cannot be created, a nodeset has no instance group, a flex-start resize
request failed) or the blueprint is
invalid, 2 usage error, unreadable file, no project, no credentials or an API error, 3 not
ready yet (VMs being created or booting, flex-start capacity asked for, nothing failed), 130
interrupted (how --watch ends).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from clusterprint.cli.commands import file_argument, project_argument
from clusterprint.cli.main import EXIT_USAGE

if TYPE_CHECKING:
    from clusterprint.cli.cluster_status import ClusterStatus, NodesetStatus, VmStatus

#: Exit statuses besides 0 and usage's 2.
EXIT_FAILED, EXIT_NOT_READY = 1, 3
WHO = "clusterprint status"
#: The fewest seconds between two refreshes.
WATCH_MIN_S = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """status FILE [--project P] [--json] [--watch [SECONDS]]."""
    parser.add_argument("file", metavar="FILE", type=file_argument,
                        help="the blueprint the cluster was deployed from")
    parser.add_argument("--project", metavar="P", type=project_argument,
                        help="the cluster's project (default: the blueprint's)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--watch", metavar="SECONDS", nargs="?", const=30, type=watch_argument,
                        help="redraw every SECONDS (default 30) until interrupted")


def watch_argument(text: str) -> int:
    """Whole seconds between refreshes, at least WATCH_MIN_S."""
    if not text.isdigit() or int(text) < WATCH_MIN_S:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds, at "
                                         f"least {WATCH_MIN_S}")
    return int(text)


def run(args: argparse.Namespace) -> int:
    """Check the blueprint, then read the cluster once or every --watch seconds."""
    from clusterprint.blueprint.validate import printable
    from clusterprint.build.compute import ComputeError
    from clusterprint.cli.cluster_status import read_cluster
    from clusterprint.cli.commands import checked_blueprint, compute_api

    blueprint, status = checked_blueprint(args.file)
    if blueprint is None:
        return status
    if blueprint.orchestrator == "managed":
        print(f"{WHO}: a managed cluster's VMs are Cluster Director's: see its console",
              file=sys.stderr)
        return EXIT_USAGE
    api = compute_api(WHO, args.project, blueprint)
    if api is None:
        return EXIT_USAGE
    while True:
        try:
            cluster = read_cluster(api, blueprint)
        except ComputeError as exc:
            print(printable(f"{WHO}: {exc}"), file=sys.stderr)
            return EXIT_USAGE
        if args.watch and not args.json and sys.stdout.isatty():
            sys.stdout.write("\033[H\033[2J")  # redraw in place
        if args.json:
            print(json.dumps(cluster.as_json(), indent=None if args.watch else 2,
                             sort_keys=True))
        else:
            # Guest attributes and API messages can hold anything: never a terminal escape.
            print("\n".join(printable(line) for line in text_lines(cluster)))
        sys.stdout.flush()
        if not args.watch:
            return exit_status(cluster)
        time.sleep(args.watch)


def exit_status(cluster: ClusterStatus) -> int:
    """0 ready, 1 something needs the user, 3 still coming up."""
    if cluster.failed:
        return EXIT_FAILED
    return 0 if cluster.ready else EXIT_NOT_READY


def text_lines(cluster: ClusterStatus) -> list[str]:
    """The text form, as the module's docstring shows it."""
    lines = [f"cluster {cluster.cluster} in {cluster.zone} (project {cluster.project})",
             f"controller {vm_line(cluster.controller)}", *failed_lines(cluster.controller)]
    for vm in cluster.logins:
        lines.append(f"login {vm_line(vm)}")
        lines += failed_lines(vm)
    for nodeset in cluster.nodesets:
        lines += nodeset_lines(nodeset)
    return lines


def on_demand_counts(nodeset: NodesetStatus) -> str:
    """The elastic VMs' counts, apart from the static ones' (none while there is none)."""
    if not nodeset.elastic_vms:
        return ""
    found = nodeset.on_demand
    return (f": {found['created']} created, {found['booting']} booting, "
            f"{found['ready']} ready, {found['failed']} failed")


def nodeset_lines(nodeset: NodesetStatus) -> list[str]:
    """A nodeset's count line, then each VM not ready, then its groups' errors."""
    head = (f"nodeset {nodeset.name}: {nodeset.wanted} wanted, {nodeset.created} created, "
            f"{nodeset.count('booting')} booting, {nodeset.count('ready')} ready, "
            f"{nodeset.count('failed')} failed")
    if nodeset.elastic:
        head += f"; up to {nodeset.elastic} more on demand" + on_demand_counts(nodeset)
    lines = [head, *(f"  {problem}" for problem in nodeset.problems)]
    for vm in nodeset.every_vm:
        if vm.state != "ready":
            lines.append(f"  {vm_line(vm)}")
            lines += ["  " + line for line in failed_lines(vm)]
    for request in nodeset.requests:
        lines.append(f"  resize request {request.name} (group {request.group}): " + (
            f"failed: {request.error}" if request.failed else
            f"waiting for capacity: {request.count} VMs, asked {request.created or '(no time)'}"
            + ("" if request.state == "ACCEPTED" else f" ({request.state})")))
    for group, errors in nodeset.groups.items():
        lines += [f"  group {group}: {e.code} (x{e.count}, last {e.last}): {e.message}"
                  for e in errors]
    return lines


def vm_line(vm: VmStatus) -> str:
    """``NAME: what it does``."""
    words = {"ready": "ready", "booting": f"booting ({vm.stage})",
             "failed": f"failed at {vm.stage}", "stopped": f"stopped ({vm.status})",
             "missing": "missing (no such VM)", "deleting": "being deleted",
             "creating": "being created" + (f": {vm.error}" if vm.error else "")}
    return f"{vm.name}: {words[vm.state]}"


def failed_lines(vm: VmStatus) -> list[str]:
    """A failed boot's last lines, indented under its VM."""
    return [f"    {line}" for line in vm.lines] if vm.state == "failed" else []
