"""What `pulumi up` would create, worked out offline by running the stack under mocks.

The real stack program runs in-process against Pulumi's mock engine in preview mode,
so no credentials, CLI or network are needed. Every resource registration is
recorded: its type token, logical name, parent, inputs (camelCase, as the engine
gets them) and dependencies. Values that only the cloud knows (an address, a self
link) stay unknown, as in `pulumi preview`, and print as ``[unknown]``; each
resource's id is known and derived from its name, ``[id of NAME]``, so references
between resources read as such. Secret values print as ``[secret]``.

``parent`` and ``dependencies`` hold logical names: clusterprint derives every
name from the blueprint's name and a role, so a name is unique within a stack.
``protect`` is the resource's protect option, and the plan's ``outputs`` are the stack's
exports: both are what the policies (clusterprint.preview.policies) check beyond the inputs.

Pulumi is imported inside functions only: ``validate`` and ``diff`` of saved plans
never pay for it.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clusterprint.preview.plan_summary import summarize, summary_text

if TYPE_CHECKING:
    from clusterprint.blueprint.model import Blueprint

#: How a secret value prints: its value never leaves the mock engine.
SECRET = "[secret]"
#: How a value known only after the cloud creates the resource prints.
UNKNOWN = "[unknown]"
#: The Pulumi project of the stack program (Pulumi.yaml), used for config keys.
PROJECT = "clusterprint"
#: The stack name the plan runs under; it only appears in URNs, never in output.
STACK = "plan"
#: What a blueprint without ``project`` plans with: the stack's gcp:project, unknown offline.
STACK_PROJECT = "[gcp:project]"
#: How deeply a saved plan may nest objects and lists: ``plan --json`` writes 10 levels at
#: most (a managed cluster's inputs).
MAX_DEPTH = 64


def mock_id(name: str) -> str:
    """The id a planned resource gets: derived from its name, so plans are stable."""
    return f"[id of {name}]"


class PlanFormatError(Exception):
    """A saved plan file that is not what ``clusterprint plan --json`` writes."""


@dataclass(frozen=True)
class PlannedResource:
    """One resource the program registers: what the engine would be asked to create."""

    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]
    dependencies: tuple[str, ...] = ()
    #: The ``protect`` resource option: Pulumi refuses to delete the resource.
    protect: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """How diff matches a resource across two plans (Pulumi's URN is built from it)."""
        return (self.type, self.name)

    @property
    def is_component(self) -> bool:
        """Components are clusterprint's own grouping; only custom resources reach GCP."""
        return self.type.startswith("clusterprint:")

    def as_json(self) -> dict[str, Any]:
        """The resource as ``plan --json`` prints it."""
        return {"type": self.type, "name": self.name, "parent": self.parent,
                "inputs": self.inputs, "dependencies": list(self.dependencies),
                "protect": self.protect}


@dataclass
class Plan:
    """Every resource of one stack, in a stable order: parents first, then by name."""

    resources: list[PlannedResource] = field(default_factory=list)
    #: The stack's outputs (``pulumi stack output``), as the stack registers them.
    outputs: dict[str, Any] = field(default_factory=dict)
    #: What the cluster holds and an estimate of its cost (clusterprint.preview.plan_summary), for a
    #: plan of a blueprint; None for a plan of another program, or one saved without it.
    summary: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """The ``plan --json`` object; ``summary`` only where the plan has one."""
        data = {"resources": [r.as_json() for r in self.resources], "outputs": self.outputs}
        return data if self.summary is None else {**data, "summary": self.summary}

    def json_text(self) -> str:
        """Same plan, same bytes: sorted keys, fixed indentation, trailing newline."""
        return json.dumps(self.as_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        """A plan read back from ``plan --json`` output; PlanFormatError when it is not one.

        Held to exactly what ``plan --json`` writes, so other JSON with a "resources" key
        (a Terraform state) is refused rather than read as a plan of nothing.
        """
        if not isinstance(data, dict) or not isinstance(data.get("resources"), list):
            raise PlanFormatError('a saved plan is an object with a "resources" list')
        extra = sorted(set(data) - {"resources", "outputs", "summary"})
        if extra:
            terraform = " (it looks like a Terraform state)" if "terraform_version" in data else ""
            raise PlanFormatError(f"unexpected top-level key {json.dumps(extra[0])}{terraform}")
        if not data["resources"]:
            raise PlanFormatError("it lists no resources; every plan holds at least its cluster")
        resources = [_resource_from_json(item, f"resources[{index}]")
                     for index, item in enumerate(data["resources"])]
        keys = [r.key for r in resources]
        if len(set(keys)) != len(keys):
            raise PlanFormatError("a resource (type, name) appears twice")
        outputs = data.get("outputs", {})
        if not isinstance(outputs, dict):
            raise PlanFormatError('"outputs" must be an object')
        summary = data.get("summary")
        if summary is not None and not isinstance(summary, dict):
            raise PlanFormatError('"summary" must be an object')
        return cls(resources, outputs, summary)

    def tree_text(self) -> str:
        """The readable form: the component hierarchy with each resource's key inputs."""
        lines = [f"{prefix}{res.name}  {res.type}{_key_inputs_text(res)}"
                 for res, prefix in _walk(self.resources)]
        custom = sum(1 for r in self.resources if not r.is_component)
        lines.append(f"\n{custom} resources to create "
                     f"({len(self.resources) - custom} components group them)")
        text = "\n".join(lines) + "\n"
        return text if self.summary is None else text + summary_text(self.summary)


#: What nests a JSON text: a string (whose brackets do not count) or a bracket.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]+|\\.)*"|[\[\]{}]')


def nests_deeper(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether a JSON text nests objects and lists deeper than ``limit``, read from the
    text before it is parsed: Python's parser raises RecursionError (not ValueError) near
    1,000 levels, and below that the diff's recursive walk of the inputs would."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        if token.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token.group() in "]}":
            depth -= 1
    return False


#: The keys of each resource in ``plan --json``, all of them always written.
RESOURCE_KEYS = ("type", "name", "parent", "inputs", "dependencies", "protect")
#: Keys a plan saved before they were written may lack, with the value they mean there.
OPTIONAL_RESOURCE_KEYS = {"protect": False}
#: A Pulumi type token, ``package:module:Type`` (``gcp:compute/network:Network``).
TYPE_TOKEN = re.compile(r"[A-Za-z][\w-]*:[\w/.-]*:[A-Za-z]\w*")


def _resource_from_json(item: Any, where: str) -> PlannedResource:
    """One entry of a saved plan's "resources", or PlanFormatError saying what is off."""
    if not isinstance(item, dict):
        raise PlanFormatError(f"{where} is not an object")
    item = {**OPTIONAL_RESOURCE_KEYS, **item}
    keys = set(item)
    if keys != set(RESOURCE_KEYS):
        wrong = sorted(keys - set(RESOURCE_KEYS)) or sorted(set(RESOURCE_KEYS) - keys)
        what = "unexpected" if keys - set(RESOURCE_KEYS) else "missing"
        raise PlanFormatError(f"{where} has {what} key {json.dumps(wrong[0])}")
    for key in ("type", "name"):
        if not isinstance(item[key], str) or not item[key]:
            raise PlanFormatError(f"{where}.{key} must be a non-empty string")
    if not TYPE_TOKEN.fullmatch(item["type"]):
        raise PlanFormatError(f"{where}.type {json.dumps(item['type'])} is not a Pulumi type "
                              "token such as gcp:compute/network:Network")
    parent, inputs, deps = item["parent"], item["inputs"], item["dependencies"]
    if parent is not None and not isinstance(parent, str):
        raise PlanFormatError(f"{where}.parent must be a string or null")
    if not isinstance(inputs, dict):
        raise PlanFormatError(f"{where}.inputs must be an object")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise PlanFormatError(f"{where}.dependencies must be a list of names")
    if not isinstance(item["protect"], bool):
        raise PlanFormatError(f"{where}.protect must be true or false")
    return PlannedResource(item["type"], item["name"], parent, inputs, tuple(deps),
                           item["protect"])


#: Inputs shown next to a resource in the tree: the ones a reviewer looks for first.
TREE_INPUTS = ("machineType", "targetSize", "zone", "location", "region", "ipCidrRange", "mtu",
               "tier", "capacityGib", "perUnitStorageThroughput", "filesystem", "purpose",
               "prefixLength", "provisioningModel")


def _key_inputs_text(res: PlannedResource) -> str:
    shown = [f"{k}={_short(res.inputs[k])}" for k in TREE_INPUTS if k in res.inputs]
    return f"  ({', '.join(shown)})" if shown else ""


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plan_program(program: Callable[[], object], config: dict[str, str] | None = None) -> Plan:
    """Run a Pulumi program function under mocks and return what it registered.

    Each call starts from a fresh root resource, config, RPC state and event loop, so
    runs in one process (tests, diff of two blueprints) cannot leak into each other
    (pulumi/pulumi#7663).
    """
    import pulumi
    from pulumi.runtime import settings
    from pulumi.runtime.config import set_all_config
    from pulumi.runtime.stack import run_in_stack
    from pulumi.runtime.sync_await import _sync_await

    recorder = _Recorder()
    settings.ROOT.set(None)
    settings.SETTINGS.outputs.clear()
    set_all_config(dict(config or {}), [])
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        monitor = recorder.monitor()
        pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=STACK, preview=True,
                                 monitor=monitor)
        # set_mocks makes a root stack and registers its outputs at once, before any
        # export; the program runs in a stack of its own, as `pulumi up` runs it, so the
        # exports reach the monitor.
        settings.ROOT.set(None)
        _sync_await(run_in_stack(program))
    finally:
        settings.ROOT.set(None)
        set_all_config({}, [])
        _close(loop, recorder.thread_loops)
    return recorder.plan()


def _close(loop: asyncio.AbstractEventLoop, thread_loops: set[asyncio.AbstractEventLoop]
           ) -> None:
    """Close the loop the plan ran on, as ``asyncio.run`` does, and those of its threads.

    A loop left open is closed by the garbage collector at interpreter exit, after
    its sockets may be gone: a traceback on stderr of a plan that succeeded. The mock
    monitor runs in the default executor's threads and opens a loop in each.
    """
    try:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())  # joins those threads
    finally:
        for thread_loop in thread_loops - {loop}:
            thread_loop.close()
        loop.close()
        # Back to a fresh interpreter's state, where the next get_event_loop() makes a
        # loop: Pulumi's own mock runs (pulumi.runtime.test) rely on that.
        asyncio.set_event_loop_policy(None)


def blueprint_program(blueprint: Blueprint) -> Callable[[], object]:
    """The stack program of ``__main__.py`` for one checked blueprint, as a function."""
    from clusterprint.components.program import declare

    return lambda: declare(blueprint)


def plan_blueprint(blueprint: Blueprint) -> Plan:
    """The plan of a blueprint that ``clusterprint validate`` accepts (the caller checks it),
    with its summary: what the cluster holds and what it would cost."""
    plan = plan_program(blueprint_program(blueprint), {"gcp:project": STACK_PROJECT})
    plan.summary = summarize(blueprint)
    return plan


class _EchoMocks:
    """Mocks that echo a resource's plain inputs back as its state, with an id from its name.

    Pulumi's ``Mocks`` base class is abstract only to name the two methods, so a plain
    class keeps this module free of a module-level Pulumi import.
    """

    def new_resource(self, args: Any) -> tuple[str, dict]:
        """Scalar inputs come back known; objects and outputs only the cloud fills do not.

        An object input may hold fields the provider computes (a Filestore network's
        ``ipAddresses``): `pulumi preview` reports such an output as unknown, so code
        that reads into it is not run, and neither is it here.
        """
        return mock_id(args.name), {k: v for k, v in args.inputs.items() if _is_flat(v)}

    def call(self, args: Any) -> dict:
        """Data-source calls echo their arguments: nothing is looked up offline."""
        return dict(args.args)

    def register_transform(self, transform: Any) -> None:
        """Stack transforms are not run by the mock engine."""

    def register_invoke_transform(self, transform: Any) -> None:
        """Invoke transforms are not run by the mock engine."""


@dataclass
class _Registration:
    type: str
    name: str
    parent_urn: str
    dependency_urns: list[str]
    inputs: dict[str, Any]
    protect: bool


class _Recorder:
    """Wraps Pulumi's MockMonitor to keep what each registration asked for.

    The mock's ``new_resource`` sees inputs only; the parent and the dependencies are
    on the gRPC request, which the monitor receives.
    """

    def __init__(self) -> None:
        self.registrations: list[_Registration] = []
        self.urn_names: dict[str, str] = {}
        #: The stack's outputs, as its last RegisterResourceOutputs carried them.
        self.outputs: dict[str, Any] = {}
        #: The event loops the monitor's threads opened, for plan_program to close.
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()

    def monitor(self) -> Any:
        """A MockMonitor whose RegisterResource also records the request."""
        from pulumi.runtime.mocks import MockMonitor
        from pulumi.runtime.rpc import deserialize_properties

        recorder = self

        class RecordingMonitor(MockMonitor):
            def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
                response = super().RegisterResource(request)
                if request.type != "pulumi:pulumi:Stack":
                    recorder.thread_loops.add(asyncio.get_event_loop())  # opened by super()
                    recorder.urn_names[response.urn] = request.name
                    recorder.registrations.append(_Registration(
                        request.type, request.name, request.parent,
                        list(request.dependencies), deserialize_properties(request.object),
                        bool(request.protect)))
                return response

            def RegisterResourceOutputs(self, request):  # noqa: N802 (gRPC method name)
                if "::pulumi:pulumi:Stack::" in request.urn:
                    recorder.outputs = deserialize_properties(request.outputs)
                return super().RegisterResourceOutputs(request)

        return RecordingMonitor(_EchoMocks())

    def plan(self) -> Plan:
        """The recorded registrations as a plan in a stable order."""
        resources = []
        for reg in self.registrations:
            deps = sorted({self._name(urn) for urn in reg.dependency_urns})
            resources.append(PlannedResource(
                reg.type, reg.name, self.urn_names.get(reg.parent_urn),
                _plain(reg.inputs), tuple(deps), reg.protect))
        return Plan(_tree_order(resources), _plain(self.outputs))

    def _name(self, urn: str) -> str:
        return self.urn_names.get(urn) or urn.rsplit("::", 1)[-1]


def _tree_order(resources: list[PlannedResource]) -> list[PlannedResource]:
    """Parents before children, siblings by (name, type): registration order is racy."""
    return [res for res, _ in _walk(resources)]


def _walk(resources: list[PlannedResource]) -> list[tuple[PlannedResource, str]]:
    """Depth-first (resource, tree prefix) pairs; a parent not in the plan counts as root."""
    names = {r.name for r in resources}
    children: dict[str | None, list[PlannedResource]] = {}
    for res in resources:
        children.setdefault(res.parent if res.parent in names else None, []).append(res)
    out: list[tuple[PlannedResource, str]] = []
    seen: set[tuple[str, str]] = set()

    def walk(parent: str | None, indent: str) -> None:
        kids = sorted(children.get(parent, []), key=lambda r: (r.name, r.type))
        for i, res in enumerate(kids):
            if res.key in seen:
                continue
            seen.add(res.key)
            last = i == len(kids) - 1
            out.append((res, indent + ("└─ " if last else "├─ ")))
            walk(res.name, indent + ("   " if last else "│  "))

    walk(None, "")
    return out


def _plain(value: Any) -> Any:
    """Engine values as JSON data: secrets and unknowns as markers, whole floats as ints."""
    from pulumi.output import Unknown
    from pulumi.runtime.rpc import is_rpc_secret

    if is_rpc_secret(value):
        return SECRET
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return f"[{type(value).__name__}]"


def _is_flat(value: Any) -> bool:
    """A scalar, or a list of scalars: nothing in it the cloud can fill in."""
    if isinstance(value, list):
        return all(_is_flat(v) and not isinstance(v, list) for v in value)
    return not isinstance(value, dict)
