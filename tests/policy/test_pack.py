"""The policy pack in policy/ serves exactly clusterprint.preview.policies, as the engine calls it.

No Pulumi CLI here: one test drives the pack's callbacks with pulumi_policy's own argument
types, another starts the pack as the CLI does (``python -m pulumi.policy ENGINE policy``)
and talks to it over the analyzer gRPC protocol the engine uses.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from types import ModuleType

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import (
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    unknown_checking_proxy,
)

from clusterprint.preview import policies
from clusterprint.preview.policies import FIREWALL, POLICIES, STACK_TYPE
from clusterprint.preview.policies import PolicyResource as Subject
from tests.support.paths import ROOT
from tests.support.policy_cases import PUBLIC_IPV4, REFUSED

PACK = ROOT / "policy"


@pytest.fixture(scope="module")
def pack() -> ModuleType:
    """policy/__main__.py imported as a module: everything but serving the PolicyPack."""
    spec = importlib.util.spec_from_file_location("clusterprint_policy_pack",
                                                  PACK / "__main__.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def callback(built: ResourceValidationPolicy | StackValidationPolicy):
    """The validate callback a pulumi_policy policy holds (a private attribute)."""
    kind = "Stack" if isinstance(built, StackValidationPolicy) else "Resource"
    return vars(built)[f"_{kind}ValidationPolicy__validate"]


def test_the_pack_registers_exactly_the_shared_policies(pack):
    built = pack.pack_policies()
    assert [p.name for p in built] == list(POLICIES)
    for pol in built:
        shared = POLICIES[pol.name]
        assert callback(pol).policy is shared  # the shared function, not a copy
        assert isinstance(pol, StackValidationPolicy) == shared.stack
        assert pol.enforcement_level == {"mandatory": EnforcementLevel.MANDATORY,
                                         "advisory": EnforcementLevel.ADVISORY}[shared.level]
        assert pol.description == shared.checks and pol.remediation_steps == shared.fix


def args_for(typ: str, inputs: dict, protect: bool, settings: policies.Settings):
    config = {"storageProtect": settings.storage_protect}
    props = unknown_checking_proxy({**inputs, "project": UNKNOWN_STRING_VALUE})
    if typ == STACK_TYPE:
        stack = PolicyResource(typ, props, "urn:stack", "clusterprint-dev",
                               PolicyResourceOptions(False, [], None, [], None, [], None),
                               None, None, [], {})
        return StackValidationArgs([stack], config)
    opts = PolicyResourceOptions(protect, [], None, [], None, [], None)
    return ResourceValidationArgs(typ, props, "urn:r", "r", opts, None, config)


@pytest.mark.parametrize(("name", "typ", "inputs", "protect", "settings", "message"), REFUSED)
def test_each_pack_policy_reports_what_the_offline_runner_reports(
        pack, name, typ, inputs, protect, settings, message):
    """Unknown values (``project`` here) do not stop a policy, as they would in the proxy."""
    built = {p.name: p for p in pack.pack_policies()}
    reported: list[str] = []
    built[name].validate(args_for(typ, inputs, protect, settings),
                         lambda text, urn=None: reported.append(text))
    subject = Subject(typ, "r" if typ != STACK_TYPE else "clusterprint-dev", inputs, protect)
    offline = list(POLICIES[name].check(subject, settings))
    assert reported == [f"{subject.name}: {m}; fix: {POLICIES[name].fix}" for m in offline]
    assert any(message in text for text in reported)


def test_whole_unknown_inputs_read_as_unknown_and_refuse_nothing(pack):
    """In `pulumi preview` a created service account's email, a list or an object may be
    unknown: the pack passes ``[unknown]`` on, as a plan has it."""
    props = {"sourceRanges": UNKNOWN_ARRAY_VALUE, "allows": [{"protocol": "tcp",
                                                             "ports": ["22"]}],
             "serviceAccount": {"email": UNKNOWN_STRING_VALUE}, "metadata": UNKNOWN_OBJECT_VALUE}
    assert pack.plain(unknown_checking_proxy(props))["sourceRanges"] == policies.UNKNOWN
    reported: list[str] = []
    for typ in (FIREWALL, policies.INSTANCE):
        args = args_for(typ, props, False, policies.Settings())
        for pol in pack.pack_policies():
            if isinstance(pol, ResourceValidationPolicy):
                pol.validate(args, lambda text, urn=None: reported.append(text))
    assert reported == []


def test_the_pack_serves_its_policies_to_the_engine_over_grpc():
    """Started as the CLI starts a Python pack; SSH from the whole internet, written in two
    halves, is a mandatory violation."""
    proc = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1",
                             str(PACK)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        port = int(proc.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            assert info.name == "clusterprint"
            assert [p.name for p in info.policies] == list(POLICIES)
            properties = struct_pb2.Struct()
            json_format.ParseDict({
                "direction": "INGRESS", "network": UNKNOWN_STRING_VALUE,
                "sourceRanges": ["0.0.0.0/1", "128.0.0.0/1"],
                "allows": [{"protocol": "tcp", "ports": ["22"]}]}, properties)
            response = stub.Analyze(analyzer_pb2.AnalyzeRequest(
                type=FIREWALL, properties=properties, urn="urn:pulumi:dev::c::fw::c-ssh",
                name="c-ssh"), timeout=30)
    finally:
        proc.kill()
        proc.communicate()
    found = [(d.policyName, d.enforcementLevel, d.message) for d in response.diagnostics]
    pol = POLICIES["no-open-firewall"]
    # The engine prints the policy's description, then the violation.
    assert found == [("no-open-firewall", analyzer_pb2.MANDATORY,
                      f"{pol.checks}\nc-ssh: sourceRanges admit {PUBLIC_IPV4} public IPv4 "
                      f"addresses, more than a /16 holds: 0.0.0.0/1, 128.0.0.0/1; "
                      f"fix: {pol.fix}")]


def test_the_unprotected_config_turns_storage_protect_off_for_the_storage_policies(pack):
    """What a blueprint with `storage.protect: false` passes as --policy-pack-config."""
    config = json.loads((PACK / "unprotected.json").read_text())
    assert set(config) <= set(POLICIES)
    assert {name for name, value in config.items() if value == {pack.PROTECT_KEY: False}} == {
        "storage-protected", "storage-unprotected"}
    assert pack.settings_of(config["storage-protected"]) == policies.Settings(
        storage_protect=False)
