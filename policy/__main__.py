"""clusterprint's policy pack: `pulumi preview --policy-pack policy` runs it on every resource.

The policies are clusterprint.preview.policies, the same functions `clusterprint plan --policy`
runs offline; this file only adapts them to pulumi_policy. Each resource's inputs reach
a policy as plain data, Pulumi's unknown values as ``[unknown]`` as in a plan, so a
policy reads the same thing in both places.

``storage.protect`` is not visible on a resource: a blueprint with ``storage.protect:
false`` runs the pack with ``--policy-pack-config policy/unprotected.json``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The pack runs from its own folder; clusterprint is the repository beside it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pulumi_policy import (  # noqa: E402
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy import proxy as unknowns  # noqa: E402

from clusterprint.preview import policies  # noqa: E402

PACK_NAME = "clusterprint"
#: The policy config key that says whether the blueprint sets ``storage.protect``.
PROTECT_KEY = "storageProtect"
LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}
#: Pulumi's sentinels for values known only after the update (pulumi_policy.proxy).
UNKNOWN_SENTINELS = frozenset(value for key, value in vars(unknowns).items()
                              if key.startswith("UNKNOWN_") and key.endswith("_VALUE"))


def plain(value: Any) -> Any:
    """Engine properties as plain data; an unknown value reads ``[unknown]`` as in a plan.

    pulumi_policy wraps properties in proxies that raise on an unknown value; reading
    through ``__target`` keeps a policy running where it can decide without that value.
    """
    if isinstance(value, unknowns._DictProxy | unknowns._ListProxy):
        value = value["__target"]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, str) and value in UNKNOWN_SENTINELS:
        return policies.UNKNOWN
    return value


def settings_of(config: Mapping[str, Any]) -> policies.Settings:
    """The blueprint's settings from the policy's config (storage.protect, true by default)."""
    return policies.Settings(storage_protect=bool(config.get(PROTECT_KEY, True)))


class ResourceCheck:
    """A pulumi_policy validate callback that runs one shared policy on one resource."""

    def __init__(self, policy: policies.Policy) -> None:
        self.policy = policy

    def __call__(self, args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        resource = policies.PolicyResource(args.resource_type, args.name, plain(args.props),
                                           bool(args.opts and args.opts.protect))
        for message in self.policy.check(resource, settings_of(args.get_config())):
            report_violation(f"{args.name}: {message}; fix: {self.policy.fix}", args.urn)


class StackCheck:
    """A pulumi_policy stack callback that runs one shared policy on the stack's outputs."""

    def __init__(self, policy: policies.Policy) -> None:
        self.policy = policy

    def __call__(self, args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for res in args.resources:
            if res.resource_type != policies.STACK_TYPE:
                continue
            stack = policies.PolicyResource(res.resource_type, res.name, plain(res.props))
            for message in self.policy.check(stack, settings_of(args.get_config())):
                report_violation(f"{res.name}: {message}; fix: {self.policy.fix}", res.urn)


#: Every policy takes the blueprint's storage.protect as config, so one file sets it for all.
CONFIG_SCHEMA = PolicyConfigSchema(properties={
    PROTECT_KEY: {"type": "boolean", "default": True,
                  "description": "the blueprint's storage.protect"}})


def pack_policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    """One pulumi_policy policy per shared policy, with its name, level and fix."""
    built: list[ResourceValidationPolicy | StackValidationPolicy] = []
    for pol in policies.POLICIES.values():
        common = dict(name=pol.name, description=pol.checks,
                      enforcement_level=LEVELS[pol.level], config_schema=CONFIG_SCHEMA,
                      remediation_steps=pol.fix)
        if pol.stack:
            built.append(StackValidationPolicy(validate=StackCheck(pol), **common))
        else:
            built.append(ResourceValidationPolicy(validate=ResourceCheck(pol), **common))
    return built


if __name__ == "__main__":
    # Serves the policies to the Pulumi engine until it exits.
    PolicyPack(name=PACK_NAME, policies=pack_policies())
