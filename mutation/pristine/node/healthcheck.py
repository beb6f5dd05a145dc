#!/usr/bin/env python3
"""clusterprint's node health check: one program for every node, configured per nodeset.

Slurm runs it as HealthCheckProgram (``--mode interval``), as a prolog before each job on
GPU nodes (``--mode prolog``) and as an epilog after a failed job (``--mode epilog``); an
operator runs it by hand. It runs every check of its mode once, prints one reason line per
failure, each ``cp:<check>: <detail>`` (the prefix is what the controller's remediation acts
on), and exits 1 when the node is unhealthy, 0 when it is healthy. Without ``--no-drain``
it drains the node itself with those reasons, since Slurm takes no action on a failing
HealthCheckProgram (slurm.conf(5), HealthCheckProgram).

It fails closed: a GPU node where nvidia-smi or dcgmi is missing, fails, hangs or prints
what proves nothing (too few or too many GPUs, one GPU twice, ``[N/A]``, a diagnostic that
ran no test) is unhealthy, unlike Cluster Toolkit's gpu-test, which passes then. Every
external command is looked up on PATH and has a timeout, every check runs in a thread the
run stops waiting for at its budget, so a hung driver or file system cannot outlive Slurm's
60 s HealthCheckProgram kill or the PrologEpilogTimeout; a config that would let it is
refused.

Standard library only, Python 3.10+, so it runs on any image; it shares common.py with the
other node programs (the renderer ships it beside this file). The command line is a fixed
contract: ``healthcheck.py --config FILE [--no-drain] [--mode MODE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import socket
import sys
import threading
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __package__:
    from clusterprint.node import common
else:
    import common

PREFIX = common.PREFIX
log = common.Log("healthcheck")

#: Slurm kills HealthCheckProgram after 60 s (slurm.conf(5) before 26.05) and a prolog or
#: epilog after PrologEpilogTimeout, which clusterprint renders as 600 s
#: (clusterprint/render/slurm_config.py; a test holds the two equal).
HEALTH_CHECK_KILL_S = 60
PROLOG_EPILOG_TIMEOUT_S = 600
#: What a run needs beside its checks' budget: draining the node (two scontrol calls) and
#: the interpreter's start and exit. A mode's budget plus these stays under Slurm's limit.
DRAIN_S = 10
MARGIN_S = 5
#: How long the run waits past its budget for a check to report that its command was cut
#: off, before it names the check as one that did not finish.
JOIN_GRACE_S = 1
#: Per-command timeout in seconds: nvidia-smi answers in a second or two on a healthy node.
COMMAND_S = 20
#: DCGM diagnostic levels: 1 "normally seconds", 2 "~2 minutes" (NVIDIA, dcgmi diag docs).
DCGM_S = {1: 90, 2: 240}
DCGM_QUICK, DCGM_THOROUGH = 1, 2
#: The mount probe's timeout: a hung NFS or Lustre mount must not hang the check.
MOUNT_S = 10
#: Where a node keeps the kernel log cursor between runs.
STATE_FILE = "/var/lib/clusterprint/healthcheck-state.json"
#: The probe, run in its own process so that a hung file system blocks only it.
MOUNT_PROBE = """
import os, sys
path = sys.argv[1]
if not os.path.ismount(path):
    print("is not mounted"); sys.exit(1)
probe = os.path.join(path, ".clusterprint-healthcheck-%d" % os.getpid())
try:
    with open(probe, "w") as handle:
        handle.write("ok")
    os.unlink(probe)
except OSError as exc:
    print("is not writable (%s)" % (exc.strerror or exc)); sys.exit(1)
"""

# Xid classification. Application errors leave the GPU healthy and do not drain:
# NVIDIA's k8s-device-plugin skips exactly these (applicationErrorXids in
# internal/rm/health.go: 13, 31, 43, 45, 68) and NVIDIA's Xid catalog gives them the
# RESTART_APP / CHECK_APP resolution (docs.nvidia.com/deploy/xid-errors). Every other Xid
# drains, the listed ones with their meaning (same catalog; 48/63/64 from
# docs.nvidia.com/deploy/dynamic-page-retirement, 154 from the GPU recovery action docs),
# any unlisted one as unknown: fail closed, as the device plugin does.
APPLICATION_XIDS = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup after an earlier error",
    68: "video processor exception",
}
DRAINING_XIDS = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "row remap or page retirement recorded",
    64: "row remap or page retirement failed",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
    154: "GPU recovery action changed",
}
XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): ([0-9]+)")
#: ``nvidia-smi nvlink -e``: a GPU's header line, then one line per link and counter.
NVLINK_GPU = re.compile(r"^GPU ([0-9]+):")
NVLINK_COUNTER = re.compile(r"^\s*Link ([0-9]+): ([^:]+): (.*?)\s*$")
#: NVLink counters that count corrected symbols or events rather than errors: pre-FEC
#: symbol errors and FEC corrections are normal on a healthy link, BER lines are rates.
NVLINK_IGNORED = re.compile(r"symbol|fec|ber\b|successful|total", re.IGNORECASE)
#: A PCI address as nvidia-smi (``00000000:3B:00.0``) and the kernel (``0000:3b:00``) print it.
BUS_ID = re.compile(r"([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})(?:\.[0-7])?")
#: A journal cursor (``s=…;i=…;b=…;m=…;t=…;x=…``, hex fields): it goes back on
#: journalctl's command line, so nothing else is taken for one.
CURSOR = re.compile(r"[0-9A-Za-z]+=[0-9A-Za-z]+(?:;[0-9A-Za-z]+=[0-9A-Za-z]+)*")
#: A network interface name (at most 15 bytes, IFNAMSIZ) as ``ip`` may be given one.
IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}")
#: dcgmi's result statuses: the ones that say a test ran, and the ones that say it did not.
DCGM_RAN = {"pass", "fail", "warn"}
DCGM_NOT_RUN = {"skip", "skipped", "not run", "notrun", "not_run"}


# The config: typed, with its defaults here; the renderer builds it and writes asdict().

class BadConfig(ValueError):
    """A config the program must not run with: the message names the file and the field."""


@dataclass(frozen=True)
class GpuChecks:
    """What a GPU nodeset's GPUs must be, and which DCGM diagnostic each mode runs."""

    #: The model nvidia-smi's name holds (``H100`` in ``NVIDIA H100 80GB HBM3``).
    model: str
    #: Whether the machine type's GPUs are linked by NVLink, whose counters are read.
    nvlink: bool = False
    #: The DCGM level of the prolog and of a run by hand; None: none.
    dcgm_level: int | None = DCGM_QUICK
    #: The DCGM level of the epilog after a failed job; None: the epilog checks nothing.
    dcgm_level_after_failure: int | None = None

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise BadConfig("model is empty")
        for name in ("dcgm_level", "dcgm_level_after_failure"):
            level = getattr(self, name)
            if level is not None and level not in DCGM_S:
                raise BadConfig(f"{name} is {level}, not one of {sorted(DCGM_S)}")


@dataclass(frozen=True)
class Disk:
    """A file system that needs ``min_free_gib`` free; ``if_mounted``: checked only where
    it is mounted (the local SSD)."""

    path: str
    min_free_gib: float
    if_mounted: bool = False

    def __post_init__(self) -> None:
        if not self.path.startswith("/"):
            raise BadConfig(f"path {self.path!r} is not absolute")
        if not math.isfinite(self.min_free_gib) or self.min_free_gib < 0:
            raise BadConfig(f"min_free_gib {self.min_free_gib} is not a size")


@dataclass(frozen=True)
class Budgets:
    """How long each mode's checks may run in all, in seconds."""

    interval: float = HEALTH_CHECK_KILL_S - DRAIN_S - MARGIN_S
    all: float = 150
    prolog: float = 150
    epilog: float = 290

    def __post_init__(self) -> None:
        for mode, limit in self.limits().items():
            budget = getattr(self, mode)
            if not math.isfinite(budget) or not 0 < budget <= limit:
                raise BadConfig(f"{mode} is {budget}: it must be over 0 and at most "
                                f"{limit}s, so the run ends inside Slurm's "
                                f"{self.killed_after(mode)}s limit")

    @staticmethod
    def killed_after(mode: str) -> int:
        """When Slurm kills a run of ``mode`` (a run by hand, ``all``, as a prolog)."""
        return HEALTH_CHECK_KILL_S if mode == "interval" else PROLOG_EPILOG_TIMEOUT_S

    @classmethod
    def limits(cls) -> dict[str, float]:
        """The largest budget of each mode: Slurm's limit less the drain and a margin."""
        return {f.name: cls.killed_after(f.name) - DRAIN_S - MARGIN_S
                for f in dataclasses.fields(cls)}


@dataclass(frozen=True)
class Config:
    """What the program checks on a node of one nodeset (``healthcheck-<nodeset>.json``)."""

    nodeset: str
    #: The GPUs the nodeset's machine type has: 0 on a CPU nodeset.
    gpus: int
    #: What its GPUs must be; None on a CPU nodeset and where the blueprint turns the GPU
    #: checks off (``health_checks.gpu: off``). A GPU nodeset's config must say which.
    gpu: GpuChecks | None = None
    mounts: tuple[str, ...] = ()
    disks: tuple[Disk, ...] = (Disk("/", 10), Disk("/mnt/localssd", 50, if_mounted=True))
    #: NVLink error counts above this drain; 0: any error does.
    nvlink_error_threshold: int = 0
    command_timeout_s: float = COMMAND_S
    mount_timeout_s: float = MOUNT_S
    budget_s: Budgets = field(default_factory=Budgets)
    state_file: str = STATE_FILE

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise BadConfig(f"gpus is {self.gpus}")
        if self.gpu is not None and not self.gpus:
            raise BadConfig("a gpu section on a nodeset with no GPUs")
        if self.nvlink_error_threshold < 0:
            raise BadConfig(f"nvlink_error_threshold is {self.nvlink_error_threshold}")
        for name in ("command_timeout_s", "mount_timeout_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or not 0 < value <= self.budget_s.interval:
                raise BadConfig(f"{name} is {value}: it must be over 0 and at most the "
                                f"interval budget, {self.budget_s.interval:g}s")
        for mode, level in (("all", self.gpu and self.gpu.dcgm_level),
                            ("prolog", self.gpu and self.gpu.dcgm_level),
                            ("epilog", self.gpu and self.gpu.dcgm_level_after_failure)):
            if level and DCGM_S[level] > getattr(self.budget_s, mode):
                raise BadConfig(f"DCGM level {level} takes up to {DCGM_S[level]}s, more "
                                f"than budget_s.{mode}")
        for path in (*self.mounts, self.state_file):
            if not path.startswith("/"):
                raise BadConfig(f"{path!r} is not an absolute path")

    @classmethod
    def from_json(cls, data: bytes | str, what: str = "the config") -> Config:
        """The config ``data`` holds; BadConfig naming ``what`` and the field when it is
        not JSON, a field has the wrong type, value or is missing, or a key is unknown."""
        try:
            raw = common.load_json(data, what)
        except common.BadJSON as exc:
            raise BadConfig(str(exc)) from None
        try:
            if isinstance(raw, dict) and "gpu" not in raw and (
                    isinstance(raw.get("gpus"), int) and raw["gpus"] > 0):
                raise BadConfig(f"gpus is {raw['gpus']} but there is no gpu section "
                                "(gpu: null turns the GPU checks off)")
            return typed(cls, raw)
        except (BadConfig, common.BadJSON) as exc:
            raise BadConfig(f"{what}: {exc}") from None


def typed(kind: object, value: object, where: str = "") -> object:
    """``value`` as a ``kind`` (a dataclass, a union with None, a tuple, a float, a plain
    type) as ``Config``'s fields declare it; BadJSON or BadConfig naming the field
    (``where``, ``gpu.model``) when it is not one."""
    args, named = typing.get_args(kind), where or "the config"
    if typing.get_origin(kind) in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        (kind,) = [a for a in args if a is not type(None)]
        return typed(kind, value, where)
    if typing.get_origin(kind) is tuple:
        items = common.expect(value, list, named)
        return tuple(typed(args[0], item, f"{where}[{n}]") for n, item in enumerate(items))
    if dataclasses.is_dataclass(kind):
        given = common.expect(value, dict, named)
        fields = {f.name: f for f in dataclasses.fields(kind)}
        unknown = sorted(set(given) - set(fields))
        missing = [name for name, f in fields.items() if name not in given
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if unknown or missing:
            raise BadConfig(f"{named}: " + (f"unknown key {unknown[0]!r}" if unknown
                                             else f"no {missing[0]}"))
        hints = typing.get_type_hints(kind)
        values = {name: typed(hints[name], item, f"{where}.{name}".lstrip("."))
                  for name, item in given.items()}
        try:
            return kind(**values)
        except BadConfig as exc:
            raise BadConfig(f"{where}: {exc}" if where else str(exc)) from None
    if kind is float:
        return float(common.expect(value, (int, float), named))
    return common.expect(value, kind, named)


def load_config(path: str) -> Config:
    """The config file at ``path``; BadConfig when it cannot be read or is not one."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise BadConfig(f"cannot read {path}: {exc.strerror or exc}") from None
    return Config.from_json(data, path)


# Commands: common.run under the run's budget.

@dataclass
class Runner:
    """Runs external commands found on PATH, each bounded by its timeout and the budget."""

    deadline: float
    #: Each command's own limit, unless it names a longer one (DCGM).
    timeout: float = COMMAND_S

    def limit(self, timeout: float | None = None) -> float:
        """The seconds a command may take now: its timeout or what is left of the budget."""
        return min(timeout or self.timeout, self.deadline - time.monotonic())

    def call(self, argv: list[str], timeout: float | None = None):
        """The finished command, whatever its exit code; CommandFailed when it is missing
        or does not finish within its timeout (or what is left of the budget)."""
        return common.run(argv, self.limit(timeout))

    def output(self, argv: list[str], timeout: float | None = None) -> str:
        """The command's stdout; CommandFailed when it is missing, fails or hangs."""
        return common.output(argv, self.limit(timeout))


def parallel(steps: list[tuple[str, Callable[[], list[str]]]], deadline: float) -> list[str]:
    """Every step's reasons, in step order, each step in a thread of its own (they wait on
    different devices). A step still running at ``deadline`` (a command that a kill cannot
    stop, a file system call that never returns) is a reason; its daemon thread is left
    behind, and the process exits without it. A step that raises is a reason too."""
    found: list[list[str] | None] = [None] * len(steps)

    def run(slot: int, label: str, step: Callable[[], list[str]]) -> None:
        try:
            found[slot] = step()
        except Exception as exc:  # a bug or an input no parser foresaw: unhealthy, named
            log(f"{label} failed: {type(exc).__name__}: {exc}", "ERROR")
            found[slot] = [f"{PREFIX}{label}: check failed ({type(exc).__name__}: "
                           f"{common.clip(exc, 80)})"]

    threads = [threading.Thread(target=run, args=(slot, label, step), daemon=True)
               for slot, (label, step) in enumerate(steps)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))
    return [reason for (label, _), reasons in zip(steps, found, strict=True)
            for reason in (reasons if reasons is not None else
                           [f"{PREFIX}{label}: did not finish within the health check's "
                            "budget"])]


# Parsers: pure functions on the recorded text of each tool, tested against fixtures. Each
# raises ValueError (common.BadJSON is one) naming the tool when its text proves nothing.

@dataclass(frozen=True)
class Gpu:
    """One GPU as ``nvidia-smi --query-gpu=index,name,pci.bus_id,ecc...`` lists it."""

    index: int
    name: str
    bus_id: str
    #: ecc.errors.uncorrected.volatile.total; None where it is not a number.
    uncorrected: int | None
    #: That column as printed: ``[N/A]`` where ECC is off.
    ecc_text: str = ""


GPU_QUERY = "index,name,pci.bus_id,ecc.errors.uncorrected.volatile.total"
REMAP_QUERY = "gpu_bus_id,remapped_rows.pending,remapped_rows.failure"
GPU_TOOL = "nvidia-smi --query-gpu"
REMAP_TOOL = "nvidia-smi --query-remapped-rows"
NVLINK_TOOL = "nvidia-smi nvlink -e"


def number(text: str) -> int | None:
    """An ASCII decimal count (``"²".isdigit()`` is true, ``int("²")`` fails), else None."""
    return int(text) if re.fullmatch(r"[0-9]{1,18}", text) else None


def unexpected(tool: str, row: list[str]) -> ValueError:
    """The error of a CSV line that is not what ``tool`` prints."""
    return ValueError(f"{tool} printed an unexpected line: {common.clip(', '.join(row), 80)}")


def csv_rows(text: str, tool: str, columns: int) -> list[list[str]]:
    """Rows of ``--format=csv,noheader,nounits`` output: fields split on commas."""
    rows = [[cell.strip() for cell in line.split(",")] for line in text.splitlines()
            if line.strip()]
    for row in rows:
        if len(row) != columns:
            raise unexpected(tool, row)
    return rows


def parse_gpus(text: str) -> list[Gpu]:
    """Every GPU of the GPU_QUERY output. The ECC count is the fourth column of each row:
    Cluster Toolkit's gpu-test sums the second column of a one-column query, always 0."""
    gpus = []
    for row in csv_rows(text, GPU_TOOL, 4):
        index, bus = number(row[0]), normal_bus_id(row[2])
        if index is None or bus is None:
            raise unexpected(GPU_TOOL, row)
        gpus.append(Gpu(index, row[1], bus, number(row[3]), row[3]))
    return gpus


def normal_bus_id(bus_id: str) -> str | None:
    """A GPU's PCI address as ``dddd:bb:dd``: nvidia-smi prints ``00000000:3B:00.0``, the
    kernel's Xid lines ``0000:3b:00``; None when it is no PCI address."""
    match = BUS_ID.fullmatch(bus_id.strip().lower())
    return f"{int(match[1], 16):04x}:{match[2]}:{match[3]}" if match else None


def twice(values: list) -> list:
    """The values listed more than once, in order."""
    return list(dict.fromkeys(v for n, v in enumerate(values) if v in values[:n]))


def gpu_reasons(gpus: list[Gpu], count: int, model: str) -> list[str]:
    """GPU count and model as the machine type promises, each GPU listed once, and
    uncorrected ECC errors (a count that is no number proves nothing)."""
    reasons = []
    if len(gpus) != count:
        reasons.append(f"{PREFIX}gpu-count: {len(gpus)} GPUs, the machine type has {count}")
    for index in twice([gpu.index for gpu in gpus]):
        reasons.append(f"{PREFIX}gpu-count: {GPU_TOOL} lists GPU {index} twice")
    for bus in twice([gpu.bus_id for gpu in gpus]):
        reasons.append(f"{PREFIX}gpu-count: {GPU_TOOL} lists PCI {bus} twice")
    if not reasons and {gpu.index for gpu in gpus} != set(range(count)):
        listed = ", ".join(str(gpu.index) for gpu in gpus)
        reasons.append(f"{PREFIX}gpu-count: {GPU_TOOL} lists GPUs {listed}, not 0 to {count - 1}")
    for gpu in gpus:
        if model.lower() not in gpu.name.lower():
            reasons.append(f"{PREFIX}gpu-model: GPU {gpu.index} is {gpu.name}, not {model}")
        if gpu.uncorrected is None and gpu.ecc_text == "[N/A]":
            reasons.append(f"{PREFIX}gpu-ecc: GPU {gpu.index} reports no uncorrected ECC "
                           "count (ECC off?)")
        elif gpu.uncorrected is None:
            reasons.append(f"{PREFIX}gpu-ecc: {GPU_TOOL} gives GPU {gpu.index} an uncorrected "
                           f"ECC count of '{common.clip(gpu.ecc_text, 40)}'")
        elif gpu.uncorrected:
            reasons.append(f"{PREFIX}gpu-ecc: {gpu.uncorrected} uncorrected errors on GPU "
                           f"{gpu.index}")
    return reasons


def flag(value: str) -> bool | None:
    """nvidia-smi's flags: Yes/No in the text forms, 1/0 in some CSV versions; None for
    anything else (``[N/A]``, ``[Unknown Error]``)."""
    return {"yes": True, "1": True, "true": True,
            "no": False, "0": False, "false": False}.get(value.strip().lower())


def remap_reasons(text: str, gpus: list[Gpu]) -> list[str]:
    """Row remaps pending (the GPU needs a reset) or failed (the GPU needs replacing), on
    every GPU the GPU query listed, each once, with a state that is Yes or No."""
    index = {gpu.bus_id: gpu.index for gpu in gpus}
    reasons, seen = [], []
    for row in csv_rows(text, REMAP_TOOL, 3):
        bus = normal_bus_id(row[0])
        if bus not in index:
            reasons.append(f"{PREFIX}gpu-remap: {REMAP_TOOL} lists "
                           f"'{common.clip(row[0], 40)}', which {GPU_TOOL} does not")
            continue
        gpu = f"GPU {index[bus]}"
        if bus in seen:
            reasons.append(f"{PREFIX}gpu-remap: {REMAP_TOOL} lists {gpu} twice")
        seen.append(bus)
        pending, failed = flag(row[1]), flag(row[2])
        if pending is None or failed is None:
            reasons.append(f"{PREFIX}gpu-remap: {REMAP_TOOL} gives {gpu} no remap state "
                           f"(pending {common.clip(row[1], 20)}, failure "
                           f"{common.clip(row[2], 20)})")
        elif failed:
            reasons.append(f"{PREFIX}gpu-remap: row remapping failed on {gpu}")
        elif pending:
            reasons.append(f"{PREFIX}gpu-remap: row remap pending on {gpu} (needs a reset)")
    missing = [str(i) for bus, i in index.items() if bus not in seen]
    if missing:
        reasons.append(f"{PREFIX}gpu-remap: {REMAP_TOOL} lists no GPU {', '.join(missing)}")
    return reasons


def parse_nvlink(text: str) -> dict[int, dict[int, dict[str, int]]]:
    """``nvidia-smi nvlink -e``: GPU index -> link -> error counter -> value. A GPU listed
    twice, a counter outside a GPU or an error counter that is no number is a ValueError."""
    found: dict[int, dict[int, dict[str, int]]] = {}
    gpu = None
    for line in text.splitlines():
        header = NVLINK_GPU.match(line)
        if header:
            gpu = int(header[1])
            if gpu in found:
                raise ValueError(f"{NVLINK_TOOL} lists GPU {gpu} twice")
            found[gpu] = {}
            continue
        counter = NVLINK_COUNTER.match(line)
        if not counter or NVLINK_IGNORED.search(counter[2]):
            continue
        value = number(counter[3])
        if gpu is None or value is None:
            where = f"GPU {gpu} " if gpu is not None else ""
            raise ValueError(f"{NVLINK_TOOL} gives {where}link {counter[1]} "
                             f"{common.clip(counter[2], 40)} as '{common.clip(counter[3], 20)}'")
        found[gpu].setdefault(int(counter[1]), {})[counter[2]] = value
    return found


def nvlink_reasons(text: str, count: int, threshold: int) -> list[str]:
    """Every GPU must be listed with its links, no other, and no link's error counter may
    exceed ``threshold``."""
    found = parse_nvlink(text)
    reasons = [f"{PREFIX}gpu-nvlink: {NVLINK_TOOL} lists no GPU {index}"
               for index in range(count) if index not in found]
    reasons += [f"{PREFIX}gpu-nvlink: {NVLINK_TOOL} lists GPU {index}, the machine type "
                f"has {count}" for index in sorted(found) if index >= count]
    for gpu, links in sorted(found.items()):
        if not links:
            reasons.append(f"{PREFIX}gpu-nvlink: {NVLINK_TOOL} lists no link of GPU {gpu}")
        bad = [f"link {link} {name} {value}" for link, counters in sorted(links.items())
               for name, value in counters.items() if value > threshold]
        if bad:
            more = f" (+{len(bad) - 2} more)" if len(bad) > 2 else ""
            reasons.append(f"{PREFIX}gpu-nvlink: GPU {gpu} {', '.join(bad[:2])}{more}")
    return reasons


def parse_xids(text: str) -> list[tuple[str, int]]:
    """(PCI address, Xid) of every NVRM Xid line of the kernel log, in order."""
    return [(normal_bus_id(m[1]) or m[1].lower(), int(m[2])) for m in XID_LINE.finditer(text)]


def xid_reasons(xids: list[tuple[str, int]], gpus: list[Gpu]) -> list[str]:
    """One reason per distinct draining Xid and GPU; application Xids drain nothing."""
    index = {gpu.bus_id: gpu.index for gpu in gpus}
    reasons = []
    for bus, xid in dict.fromkeys(xids):
        if xid in APPLICATION_XIDS:
            continue
        where = index.get(bus)
        gpu = f"GPU {where}" if where is not None else f"PCI {bus}"
        meaning = DRAINING_XIDS.get(xid, "not in the classification table")
        reasons.append(f"{PREFIX}gpu-xid: Xid {xid} on {gpu} ({meaning})")
    return reasons


def last_cursor(text: str) -> str | None:
    """The cursor ``journalctl --show-cursor`` prints last: where the next read starts.
    Only a well-formed one: it goes back on journalctl's command line."""
    cursors = [c for c in re.findall(r"^-- cursor: (.*)$", text, re.MULTILINE)
               if CURSOR.fullmatch(c)]
    return cursors[-1] if cursors else None


def dcgm_results(text: str, tool: str) -> list[tuple[str, dict]]:
    """(test name, result) of every result of ``dcgmi diag -j``: ``DCGM Diagnostic`` ->
    test_categories -> tests -> results (the layout Google's cluster-health-scanner parses;
    DCGM publishes no stable schema, so anything else is a BadJSON naming the tool)."""
    what = f"{tool} -j"
    report = common.expect(common.load_json(text, what), dict, what)
    diagnostic = common.expect(report.get("DCGM Diagnostic"), dict, f"{what}: DCGM Diagnostic")
    categories = common.expect(diagnostic.get("test_categories"), list,
                               f"{what}: test_categories")
    found = []
    for category in categories:
        category = common.expect(category, dict, f"{what}: a test category")
        for test in common.expect(category.get("tests", []), list, f"{what}: tests"):
            test = common.expect(test, dict, f"{what}: a test")
            name = common.expect(test.get("name", "?"), str, f"{what}: a test's name")
            for result in common.expect(test.get("results", []), list, f"{what}: results"):
                found.append((name, common.expect(result, dict, f"{what}: a result of {name}")))
    return found


def dcgm_failure(name: str, result: dict, level: int, what: str) -> str:
    """The reason of a failed result: the test, its GPU and what it said."""
    gpu = common.expect(result.get("gpu_id", ""), (str, int), f"{what}: gpu_id")
    info = result.get("info")
    if info is None:
        warnings = common.expect(result.get("warnings", []), list, f"{what}: warnings")
        info = [common.expect(common.expect(w, dict, f"{what}: a warning").get("warning", ""),
                              str, f"{what}: a warning") for w in warnings]
    info = common.expect(info, (str, list), f"{what}: info")
    said = " ".join(common.expect(i, str, f"{what}: info") for i in info
                    ) if isinstance(info, list) else info
    where = f" on GPU {gpu}" if gpu != "" else ""
    detail = f": {common.clip(said.strip(), 80)}" if said.strip() else ""
    return f"{PREFIX}gpu-dcgm: diag -r {level} {name} failed{where}{detail}"


def dcgm_reasons(text: str, level: int, exit_code: int = 0, failure: str = "") -> list[str]:
    """Failed tests of ``dcgmi diag -r LEVEL -j``; ``failure`` is what dcgmi said where it
    exited non-zero. A report that is none, names no failed test where dcgmi failed, or
    ran no test (every result skipped or not run) proves nothing: each is a reason."""
    tool = f"dcgmi diag -r {level}"
    try:
        results = dcgm_results(text, tool)
        statuses = [(name, result, common.expect(result.get("status"), str,
                                                 f"{tool} -j: the status of {name}"
                                                 ).strip().lower())
                    for name, result in results]
        failed = [dcgm_failure(name, result, level, f"{tool} -j: {name}")
                  for name, result, status in statuses if status == "fail"]
    except common.BadJSON as exc:
        return [f"{PREFIX}gpu-dcgm: {failure or exc}"]
    unknown = [f"{PREFIX}gpu-dcgm: {tool} gives {name} the status '{common.clip(status, 20)}'"
               for name, _, status in statuses if status not in DCGM_RAN | DCGM_NOT_RUN]
    if failed or unknown:
        return failed + unknown
    if exit_code:
        return [f"{PREFIX}gpu-dcgm: {tool} failed (exit {exit_code}), with no failed test "
                "in its report"]
    if not any(status in DCGM_RAN for _, _, status in statuses):
        skipped = f" ({len(statuses)} skipped or not run)" if statuses else ""
        return [f"{PREFIX}gpu-dcgm: {tool} ran no tests{skipped}"]
    return []


ROUTE_TOOL = "ip -j route show default"
ADDR_TOOL = "ip -j -4 addr show dev"


def route_device(text: str) -> str | None:
    """The interface of the default route in ``ip -j route show default``: the primary NIC.
    A name that is not an interface name is a ValueError (it goes on ``ip``'s command line)."""
    routes = common.expect(common.load_json(text or "[]", ROUTE_TOOL), list, ROUTE_TOOL)
    for route in routes:
        device = common.expect(common.expect(route, dict, f"{ROUTE_TOOL}: a route"
                                             ).get("dev", ""), str, f"{ROUTE_TOOL}: dev")
        if device and not IFNAME.fullmatch(device):
            raise ValueError(f"{ROUTE_TOOL} names the device '{common.clip(device, 40)}'")
        if device:
            return device
    return None


def has_ipv4(text: str) -> bool:
    """Whether ``ip -j -4 addr show dev X`` lists an address."""
    links = common.expect(common.load_json(text or "[]", ADDR_TOOL), list, ADDR_TOOL)
    return any(common.expect(info, dict, f"{ADDR_TOOL}: addr_info").get("local")
               for link in links
               for info in common.expect(common.expect(link, dict, f"{ADDR_TOOL}: a link"
                                                       ).get("addr_info", []), list,
                                         f"{ADDR_TOOL}: addr_info"))


# Checks: each returns its reasons; a command that fails is a reason of that check.

@dataclass
class Check:
    """The checks of one run, sharing its config, runner and what earlier steps learnt."""

    config: Config
    runner: Runner
    mode: str
    gpus: list[Gpu] = field(default_factory=list)
    #: The kernel log cursor to remember once the run's reasons have been delivered.
    cursor: str | None = None

    def guarded(self, prefix: str, check: Callable[[], list[str]]) -> list[str]:
        """``check()``'s reasons, or one reason under ``prefix`` when its command failed or
        printed what proves nothing."""
        try:
            return check()
        except (common.CommandFailed, ValueError) as exc:
            return [f"{PREFIX}{prefix}: {exc}"]

    def nvidia_smi(self) -> list[str]:
        """Count, model and ECC first (one query); remap, NVLink and Xids use its GPUs."""
        reasons = self.guarded("gpu-count", self.query_gpus)
        if not self.gpus:
            return reasons
        later = [("gpu-remap", self.row_remap), ("gpu-xid", self.xids)]
        if self.config.gpu.nvlink:
            later.append(("gpu-nvlink", self.nvlink))
        return reasons + parallel([(label, lambda step=step, label=label:
                                    self.guarded(label, step)) for label, step in later],
                                  self.runner.deadline)

    def query_gpus(self) -> list[str]:
        """One query for count, model and ECC; the GPUs it lists name the later reasons."""
        text = self.runner.output(["nvidia-smi", f"--query-gpu={GPU_QUERY}",
                                   "--format=csv,noheader,nounits"])
        gpus = parse_gpus(text)
        reasons = gpu_reasons(gpus, self.config.gpus, self.config.gpu.model)
        # The later checks name GPUs by the query's bus ids: only a list that proves the
        # GPUs are the ones expected may stand for them.
        self.gpus = gpus if not [r for r in reasons if r.startswith(f"{PREFIX}gpu-count")
                                 and "twice" in r] else []
        return reasons

    def row_remap(self) -> list[str]:
        """A pending remap needs a GPU reset, a failed one a new GPU: both drain."""
        text = self.runner.output(["nvidia-smi", f"--query-remapped-rows={REMAP_QUERY}",
                                   "--format=csv,noheader,nounits"])
        return remap_reasons(text, self.gpus)

    def nvlink(self) -> list[str]:
        """The error counters of every link of every GPU (``-e``; ``-sc`` is deprecated)."""
        text = self.runner.output(["nvidia-smi", "nvlink", "-e"])
        return nvlink_reasons(text, self.config.gpus, self.config.nvlink_error_threshold)

    def xids(self) -> list[str]:
        """Xids in the kernel log of this boot since the last delivered run."""
        argv = ["journalctl", "-k", "-b", "0", "-q", "--no-pager", "-o", "short-iso",
                "--show-cursor"]
        previous = read_cursor(self.config.state_file)
        if previous:
            argv.append(f"--after-cursor={previous}")
        text = self.runner.output(argv)
        self.cursor = last_cursor(text) or previous
        for bus, xid in parse_xids(text):
            if xid in APPLICATION_XIDS:
                log(f"Xid {xid} on {bus} ({APPLICATION_XIDS[xid]}): an application error, "
                    "not drained")
        return xid_reasons(parse_xids(text), self.gpus)

    def dcgm(self, level: int) -> list[str]:
        """The DCGM diagnostic at ``level``; it exits non-zero when a test fails, so its
        JSON report is read first, and an exit code its report does not explain is a
        reason of its own."""
        argv = ["dcgmi", "diag", "-r", str(level), "-j"]

        def diag() -> list[str]:
            done = self.runner.call(argv, timeout=DCGM_S[level])
            return dcgm_reasons(done.stdout, level, done.returncode,
                                common.failure(argv, done) if done.returncode else "")
        return self.guarded("gpu-dcgm", diag)

    def disks(self) -> list[str]:
        """Free space on each disk of the config; one mounted only sometimes (the local
        SSD) is checked where it is mounted."""
        reasons = []
        for disk in self.config.disks:
            if disk.if_mounted and not os.path.ismount(disk.path):
                continue
            try:
                stat = os.statvfs(disk.path)
            except OSError as exc:
                reasons.append(f"{PREFIX}disk: {disk.path}: {exc.strerror or exc}")
                continue
            free = stat.f_bavail * stat.f_frsize / 2**30
            if free < disk.min_free_gib:
                reasons.append(f"{PREFIX}disk: {disk.path} has {free:.1f} GiB free, needs "
                               f"{disk.min_free_gib:.12g}")
        return reasons

    def mount(self, path: str) -> list[str]:
        """``path`` is a mount point and a file can be written there, within the mount
        timeout: the probe runs in a process of its own, so a hung mount hangs only it."""
        limit = self.runner.limit(self.config.mount_timeout_s)
        try:
            done = self.runner.call([sys.executable, "-c", MOUNT_PROBE, path], limit)
        except common.CommandFailed:
            return [f"{PREFIX}mount: {path} did not answer within {max(limit, 0):.0f}s"]
        if done.returncode:
            said = done.stdout.strip() or f"probe failed (exit {done.returncode})"
            return [f"{PREFIX}mount: {path} {said}"]
        return []

    def nic(self) -> list[str]:
        """The primary NIC (the default route's) has an IPv4 address: without one the node
        cannot reach the controller or storage."""
        def addressed() -> list[str]:
            device = route_device(self.runner.output(["ip", "-j", "route", "show", "default"]))
            if device is None:
                return [f"{PREFIX}nic: no default route, so no primary NIC"]
            if not has_ipv4(self.runner.output(["ip", "-j", "-4", "addr", "show", "dev",
                                                device])):
                return [f"{PREFIX}nic: the primary NIC {device} has no IPv4 address"]
            return []
        return self.guarded("nic", addressed)

    def tools(self) -> list[str]:
        """Fail closed: the GPU tools the checks need must be installed."""
        return [f"{PREFIX}gpu-tools: {tool} is not on PATH" for tool in ("nvidia-smi", "dcgmi")
                if shutil.which(tool) is None]

    def steps(self, dcgm_level: int | None) -> list[tuple[str, Callable[[], list[str]]]]:
        """What this run checks, each by the check its reasons name: the node's disks,
        mounts and NIC, then its GPUs."""
        steps = [("disk", self.disks), ("nic", self.nic)]
        steps += [(f"mount: {path}", lambda path=path: self.mount(path))
                  for path in self.config.mounts]
        if self.config.gpu:
            missing = self.tools()
            steps.append(("gpu-tools", lambda: missing))
            if not missing:
                steps.append(("gpu-count", self.nvidia_smi))
                if dcgm_level:
                    steps.append(("gpu-dcgm", lambda: self.dcgm(dcgm_level)))
        return steps

    def run(self, dcgm_level: int | None) -> list[str]:
        """Every step at once; reasons in step order, within the budget."""
        return parallel(self.steps(dcgm_level), self.runner.deadline + JOIN_GRACE_S)


# State: the kernel log cursor, so that each Xid is reported once per occurrence. The
# interval run and the prolog run at once on one node: every write is atomic (a temp file
# of its own, renamed) and the read-decide-write holds the state file's lock.

def read_cursor(path: str) -> str | None:
    """The saved cursor; None when there is none or the file proves nothing (the whole
    boot's kernel log is read again then: an Xid may be reported twice, never missed)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log(f"cannot read {path}: {exc.strerror or exc}; reading this boot's kernel log "
            "from its start", "WARNING")
        return None
    try:
        state = common.expect(common.load_json(data, path), dict, path)
        cursor = common.expect(state.get("cursor"), str, f"{path}: cursor")
    except common.BadJSON as exc:
        log(f"{exc}; reading this boot's kernel log from its start", "WARNING")
        return None
    return cursor if CURSOR.fullmatch(cursor) else None


def later(cursor: str, saved: str) -> bool:
    """Whether ``cursor`` is past ``saved`` in the journal: by sequence number where both
    are of one journal (``s=``), else it is taken as the newer one."""
    ours, theirs = (dict(p.split("=", 1) for p in c.split(";")) for c in (cursor, saved))
    try:
        if ours.get("s") == theirs.get("s"):
            return int(ours["i"], 16) > int(theirs["i"], 16)
    except (KeyError, ValueError):
        pass
    return cursor != saved


def save_cursor(path: str, cursor: str) -> None:
    """Remember ``cursor`` unless another run already saved one as far or further."""
    with common.locked(path):
        saved = read_cursor(path)
        if saved is None or later(cursor, saved):
            common.atomic_write(path, json.dumps({"cursor": cursor}) + "\n")


# Draining.

def node_name() -> str:
    """The Slurm node name: SLURMD_NODENAME where slurmd runs us, else the short hostname
    (a dynamic node registers under its hostname)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def drain(runner: Runner, node: str, reasons: list[str]) -> bool:
    """Drain ``node`` with ``reasons``; True once Slurm holds it drained with them.

    A node an operator drained for another reason keeps that reason: overwriting it with a
    ``cp:`` one would hand the node to the remediation loop.
    """
    reason = common.joined(reasons)
    try:
        shown = [n for n in common.parse_nodes(
            runner.output(["scontrol", "show", "node", node, "-o"])) if n.name == node]
        if not shown:
            log(f"could not drain {node}: scontrol show node printed no line for it", "ERROR")
            return False
        if shown[0].drained and shown[0].reason and not shown[0].reason.startswith(PREFIX):
            log(f"{node} is already drained by someone else ({shown[0].reason}); left as it is")
            return True
        if shown[0].drained and shown[0].reason == reason:
            return True
        runner.output(["scontrol", "update", f"nodename={node}", "state=drain",
                       f"reason={reason}"])
    except common.CommandFailed as exc:
        log(f"could not drain {node}: {exc}", "ERROR")
        return False
    log(f"drained {node}: {reason}", "WARNING")
    return True


def job_failed(environ: dict[str, str]) -> bool:
    """Whether the job the epilog follows failed: its script's exit code or signal
    (SLURM_JOB_EXIT_CODE2 ``code:signal``, else the raw SLURM_JOB_EXIT_CODE status),
    as slurmd sets them for the epilog."""
    code2 = environ.get("SLURM_JOB_EXIT_CODE2")
    if code2:
        return code2 != "0:0"
    status = environ.get("SLURM_JOB_EXIT_CODE")
    return bool(status) and status != "0"


def dcgm_level(config: Config, mode: str) -> int | None:
    """The DCGM diagnostic a mode runs: none between jobs (it would disturb a running
    job), level 1 before a job and by hand, level 2 after a failed job (``thorough``)."""
    if config.gpu is None or mode == "interval":
        return None
    return config.gpu.dcgm_level_after_failure if mode == "epilog" else config.gpu.dcgm_level


def main(argv: list[str] | None = None) -> int:
    start = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="healthcheck-<nodeset>.json")
    parser.add_argument("--no-drain", action="store_true",
                        help="only report: no scontrol, and the kernel log is read again "
                             "next time")
    parser.add_argument("--mode", choices=[f.name for f in dataclasses.fields(Budgets)],
                        default="all",
                        help="all: every check once (default); interval: no DCGM "
                             "diagnostic (HealthCheckProgram); prolog: before a job; "
                             "epilog: after a job, checking only after a failed one")
    args = parser.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):  # a reason is printed whatever the locale
        sys.stdout.reconfigure(errors="backslashreplace")
    config = check = None
    try:
        config = load_config(args.config)
    except BadConfig as exc:
        reasons = [f"{PREFIX}config: {exc}"]
    else:
        if args.mode == "epilog" and not job_failed(dict(os.environ)):
            return 0
        runner = Runner(start + getattr(config.budget_s, args.mode), config.command_timeout_s)
        check = Check(config, runner, args.mode)
        reasons = check.run(dcgm_level(config, args.mode))
    reasons = [common.clip(reason) for reason in reasons]
    for reason in reasons:
        print(reason)
    sys.stdout.flush()
    if args.no_drain:
        return 1 if reasons else 0
    drain_runner = Runner(time.monotonic() + DRAIN_S, min(COMMAND_S, DRAIN_S))
    delivered = not reasons or drain(drain_runner, node_name(), reasons)
    if check is not None and check.cursor is not None and delivered:
        try:
            save_cursor(config.state_file, check.cursor)
        except OSError as exc:  # the next run reads the kernel log again: nothing is lost
            log(f"cannot save the kernel log cursor in {config.state_file}: "
                f"{exc.strerror or exc}", "ERROR")
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
