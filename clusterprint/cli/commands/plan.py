"""List the resources `pulumi up` would create, offline, under Pulumi's mocks.

The stack program of __main__.py runs in-process against a mock engine: no
credentials, no network, no Pulumi CLI. Values only the cloud knows print as
[unknown], ids as [id of NAME], secrets as [secret]. Same blueprint, same output.

--json prints {"resources": [{"type", "name", "parent", "inputs", "dependencies",
"protect"}], "outputs": {...}, "summary": {...}}: type is Pulumi's type token, name the
logical name, parent the parent's logical name (null at the top), inputs as the engine
receives them (camelCase), dependencies the logical names of the resources it waits for,
protect its protect option; outputs are the stack's outputs. Save it for `clusterprint diff`.

Both forms end with a summary (--json: the "summary" key): nodes per machine type (with
the max_count ceiling where one is set), GPUs per type and in all, login and controller
VMs, Filestore and Lustre GiB per tier, buckets, the images the VMs boot (clusterprint's
by content name, family and base: `pulumi up` or `clusterprint image build` builds one the
project lacks; a nodeset's own image must exist), and an estimated cost per hour and per
month (730 hours) at list prices, in the blueprint's region where a price row exists for
it and else in us-central1: no discounts, no network egress, reserved nodes at the
on-demand price. Each price names its source and the day it was read. What has no price on
record is listed as such, and then there is no total: the line reads "at least" the priced
sum, INCOMPLETE, and names each missing item (--json: hourly and monthly null,
partialHourly and partialMonthly the sum, missing the items with their reasons).

FILE is read once, so it may be a pipe: `clusterprint plan <(git show main:bp.yaml)`.

--policy also checks the plan against the policies of the policy pack in policy/ (the
same functions `pulumi preview --policy-pack policy` runs): each violation is one line
on stderr with its level, the resource's logical name, what is wrong, the policy's name
and the fix. Advisory violations only warn.

Exit status: 0 planned, 1 invalid blueprint (the validator's lines on stderr),
2 usage error or unreadable file (2 too when stdout cannot be written, as on a full disk),
4 with --policy when a mandatory policy is violated (the plan is still printed).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from clusterprint.cli.commands import file_argument

if TYPE_CHECKING:
    from clusterprint.preview.plan import Plan

#: Exit status of ``plan --policy`` when a mandatory policy is violated.
EXIT_POLICY = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """plan FILE [--json]."""
    parser.add_argument("file", metavar="FILE", type=file_argument,
                        help="blueprint file (.yaml or .json)")
    parser.add_argument("--json", action="store_true",
                        help="print the plan as JSON (the input `clusterprint diff` reads)")
    parser.add_argument("--policy", action="store_true",
                        help="check the plan against the policy pack's policies; "
                             "exit 4 on a mandatory violation")


def run(args: argparse.Namespace) -> int:
    """Check the blueprint, then plan it; problems go to stderr like `validate` prints them."""
    from clusterprint.cli.commands import checked_blueprint
    from clusterprint.preview.plan import plan_blueprint

    blueprint, status = checked_blueprint(args.file)
    if blueprint is None:
        return status
    plan = plan_blueprint(blueprint)
    sys.stdout.write(plan.json_text() if args.json else plan.tree_text())
    return policy_status(plan, blueprint.storage.protect) if args.policy else 0


def policy_status(plan: Plan, storage_protect: bool) -> int:
    """Print every policy violation of the plan to stderr; 4 when one is mandatory."""
    from clusterprint.preview.policies import Settings, check_plan

    violations = check_plan(plan, Settings(storage_protect=storage_protect))
    for violation in violations:
        print(violation.text(), file=sys.stderr)
    mandatory = sum(v.policy.level == "mandatory" for v in violations)
    print(f"policy: {mandatory} mandatory, {len(violations) - mandatory} advisory "
          "violations", file=sys.stderr)
    return EXIT_POLICY if mandatory else 0
