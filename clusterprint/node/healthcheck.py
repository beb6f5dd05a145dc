#!/usr/bin/env python3
"""clusterprint's node health check: one program for every node, configured per nodeset.

Slurm runs it as HealthCheckProgram (``--mode interval``), as a prolog before each job on
GPU nodes (``--mode prolog``) and as an epilog after a failed job (``--mode epilog``); an
operator runs it by hand. It runs every check of its mode once, prints one reason line per
failure, each ``cp:<check>: <detail>`` (the prefix is what the controller's remediation acts
on), and exits 1 when the node is unhealthy, 0 when it is healthy. Without ``--no-drain``
it drains the node itself with those reasons, since Slurm takes no action on a failing
HealthCheckProgram (slurm.conf(5), HealthCheckProgram).

It fails closed: a GPU node where nvidia-smi or dcgmi is missing, fails or hangs is
unhealthy, unlike Cluster Toolkit's gpu-test, which passes then. Every external command is
looked up on PATH and has a timeout, and the whole run has a budget, so a hung driver
cannot outlive Slurm's 60 s HealthCheckProgram kill or the PrologEpilogTimeout.

Standard library only, Python 3.10+, so it runs on any image. The command line is a fixed
contract: ``healthcheck.py --config FILE [--no-drain] [--mode MODE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

#: Every reason starts with this: the remediation loop acts only on nodes drained with it.
PREFIX = "cp:"
#: Reasons longer than this are cut at a whole reason, so `sinfo -R` stays readable.
REASON_MAX = 256
#: How long each mode may run in all, in seconds. HealthCheckProgram is killed after 60 s
#: (slurm.conf(5) before 26.05); prolog and epilog must finish inside PrologEpilogTimeout.
BUDGET_S = {"interval": 45, "all": 150, "prolog": 150, "epilog": 290}
#: Per-command timeouts in seconds: nvidia-smi answers in a second or two on a healthy node.
COMMAND_S = 20
#: DCGM diagnostic levels: 1 "normally seconds", 2 "~2 minutes" (NVIDIA, dcgmi diag docs).
DCGM_S = {1: 90, 2: 240}
#: The mount probe: a hung NFS or Lustre mount must not hang the check.
MOUNT_S = 10
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
XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)")
#: NVLink counters that count errors rather than corrected symbols or events: pre-FEC
#: symbol errors and FEC corrections are normal on a healthy link, BER lines are rates.
NVLINK_LINE = re.compile(r"^\s*Link (\d+): ([A-Za-z][A-Za-z -]*?): (\d+)\s*$")
NVLINK_IGNORED = re.compile(r"symbol|fec|ber\b|successful|total", re.IGNORECASE)


class CommandFailed(Exception):
    """An external command is missing, failed or timed out: the message says which."""


@dataclass
class Runner:
    """Runs external commands found on PATH, each bounded by its timeout and the budget."""

    deadline: float
    #: Each command's own limit, unless it names a longer one (DCGM).
    timeout: float = COMMAND_S

    def call(self, argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
        """The finished command, whatever its exit code; CommandFailed when it is missing
        or does not finish within its timeout (or what is left of the budget)."""
        if shutil.which(argv[0]) is None:
            raise CommandFailed(f"{argv[0]} is not on PATH")
        left = min(timeout or self.timeout, self.deadline - time.monotonic())
        if left <= 0:
            raise CommandFailed(f"{shown(argv)}: no time left in the health check's budget")
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=left,
                                  stdin=subprocess.DEVNULL, errors="replace")
        except subprocess.TimeoutExpired:
            raise CommandFailed(f"{shown(argv)} did not answer within {left:.0f}s") from None
        except OSError as exc:
            raise CommandFailed(f"{shown(argv)}: {exc.strerror or exc}") from None

    def run(self, argv: list[str], timeout: float | None = None) -> str:
        """The command's stdout; CommandFailed when it is missing, fails or hangs."""
        done = self.call(argv, timeout)
        if done.returncode:
            raise CommandFailed(failure(argv, done))
        return done.stdout


def shown(argv: list[str]) -> str:
    """A command as a reason names it: its name and leading words, not its long options."""
    return " ".join(word for word in argv[:4] if not word.startswith("--"))


def failure(argv: list[str], done: subprocess.CompletedProcess) -> str:
    """What a failed command said last, with its exit code."""
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return (f"{shown(argv)} failed (exit {done.returncode})"
            + (f": {said[-1].strip()[:80]}" if said else ""))


# Parsers: pure functions on the recorded text of each tool, tested against fixtures.

@dataclass(frozen=True)
class Gpu:
    """One GPU as ``nvidia-smi --query-gpu=index,name,pci.bus_id,ecc...`` lists it."""

    index: int
    name: str
    bus_id: str
    #: ecc.errors.uncorrected.volatile.total; None where nvidia-smi prints [N/A].
    uncorrected: int | None


GPU_QUERY = "index,name,pci.bus_id,ecc.errors.uncorrected.volatile.total"
REMAP_QUERY = "gpu_bus_id,remapped_rows.pending,remapped_rows.failure"


def csv_rows(text: str) -> list[list[str]]:
    """Rows of ``--format=csv,noheader,nounits`` output: fields split on commas."""
    return [[cell.strip() for cell in line.split(",")] for line in text.splitlines()
            if line.strip()]


def parse_gpus(text: str) -> list[Gpu]:
    """Every GPU of the GPU_QUERY output. The ECC count is the fourth column of each row:
    Cluster Toolkit's gpu-test sums the second column of a one-column query, always 0."""
    gpus = []
    for row in csv_rows(text):
        if len(row) != 4 or not row[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi line: {', '.join(row)[:80]}")
        count = int(row[3]) if row[3].isdigit() else None
        gpus.append(Gpu(int(row[0]), row[1], normal_bus_id(row[2]), count))
    return gpus


def normal_bus_id(bus_id: str) -> str:
    """A GPU's PCI address as ``dddd:bb:dd``: nvidia-smi prints ``00000000:3B:00.0``, the
    kernel's Xid lines ``0000:3b:00``."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return bus_id.strip().lower()
    domain, bus, device = parts
    try:
        return f"{int(domain, 16):04x}:{bus}:{device.split('.')[0]}"
    except ValueError:
        return bus_id.strip().lower()


def gpu_reasons(gpus: list[Gpu], count: int, model: str) -> list[str]:
    """GPU count and model as the machine type promises, and uncorrected ECC errors."""
    reasons = []
    if len(gpus) != count:
        reasons.append(f"{PREFIX}gpu-count: {len(gpus)} GPUs, the machine type has {count}")
    for gpu in gpus:
        if model.lower() not in gpu.name.lower():
            reasons.append(f"{PREFIX}gpu-model: GPU {gpu.index} is {gpu.name}, not {model}")
        if gpu.uncorrected is None:
            reasons.append(f"{PREFIX}gpu-ecc: GPU {gpu.index} reports no uncorrected ECC "
                           "count (ECC off?)")
        elif gpu.uncorrected:
            reasons.append(f"{PREFIX}gpu-ecc: {gpu.uncorrected} uncorrected errors on GPU "
                           f"{gpu.index}")
    return reasons


def yes(value: str) -> bool:
    """nvidia-smi's flags: Yes/No in the text forms, 1/0 in some CSV versions."""
    return value.strip().lower() in {"yes", "1", "true"}


def remap_reasons(text: str, gpus: list[Gpu]) -> list[str]:
    """Row remaps pending (the GPU needs a reset) or failed (the GPU needs replacing)."""
    index = {gpu.bus_id: gpu.index for gpu in gpus}
    reasons = []
    for row in csv_rows(text):
        if len(row) != 3:
            raise ValueError(f"unexpected nvidia-smi line: {', '.join(row)[:80]}")
        bus = normal_bus_id(row[0])
        gpu = f"GPU {index[bus]}" if bus in index else f"GPU {bus}"
        if yes(row[2]):
            reasons.append(f"{PREFIX}gpu-remap: row remapping failed on {gpu}")
        elif yes(row[1]):
            reasons.append(f"{PREFIX}gpu-remap: row remap pending on {gpu} (needs a reset)")
    return reasons


def parse_nvlink(text: str) -> dict[int, dict[int, dict[str, int]]]:
    """``nvidia-smi nvlink -e``: GPU index -> link -> error counter -> value."""
    found: dict[int, dict[int, dict[str, int]]] = {}
    gpu = None
    for line in text.splitlines():
        header = re.match(r"^GPU (\d+):", line)
        if header:
            gpu = int(header[1])
            found[gpu] = {}
            continue
        counter = NVLINK_LINE.match(line)
        if counter and gpu is not None and not NVLINK_IGNORED.search(counter[2]):
            found[gpu].setdefault(int(counter[1]), {})[counter[2]] = int(counter[3])
    return found


def nvlink_reasons(text: str, count: int, threshold: int) -> list[str]:
    """Every GPU must be listed, and no link's error counter may exceed ``threshold``."""
    found = parse_nvlink(text)
    reasons = [f"{PREFIX}gpu-nvlink: nvidia-smi nvlink -e lists no GPU {index}"
               for index in range(count) if index not in found]
    for gpu, links in sorted(found.items()):
        bad = [f"link {link} {name} {value}" for link, counters in sorted(links.items())
               for name, value in counters.items() if value > threshold]
        if bad:
            more = f" (+{len(bad) - 2} more)" if len(bad) > 2 else ""
            reasons.append(f"{PREFIX}gpu-nvlink: GPU {gpu} {', '.join(bad[:2])}{more}")
    return reasons


def parse_xids(text: str) -> list[tuple[str, int]]:
    """(PCI address, Xid) of every NVRM Xid line of the kernel log, in order."""
    return [(normal_bus_id(m[1]), int(m[2])) for m in XID_LINE.finditer(text)]


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
    """The cursor ``journalctl --show-cursor`` prints last: where the next read starts."""
    cursors = re.findall(r"^-- cursor: (\S+)$", text, re.MULTILINE)
    return cursors[-1] if cursors else None


def dcgm_reasons(text: str, level: int) -> list[str]:
    """Failed tests of ``dcgmi diag -r LEVEL -j``: ``DCGM Diagnostic`` -> test_categories
    -> tests -> results with status "fail" (the layout Google's cluster-health-scanner
    parses; DCGM publishes no stable schema, so anything else fails closed)."""
    try:
        report = json.loads(text)
        categories = report["DCGM Diagnostic"]["test_categories"]
    except (ValueError, KeyError, TypeError):
        return [f"{PREFIX}gpu-dcgm: dcgmi diag -r {level} printed no diagnostic report"]
    if not categories:
        return [f"{PREFIX}gpu-dcgm: dcgmi diag -r {level} ran no tests"]
    reasons = []
    for category in categories:
        for test in category.get("tests", []):
            for result in test.get("results", []):
                if str(result.get("status", "")).lower() != "fail":
                    continue
                gpu = f" on GPU {result['gpu_id']}" if result.get("gpu_id", "") != "" else ""
                info = result.get("info") or [w.get("warning", "") for w in
                                              result.get("warnings", [])]
                info = " ".join(info) if isinstance(info, list) else str(info)
                detail = f": {info.strip()[:80]}" if info.strip() else ""
                reasons.append(f"{PREFIX}gpu-dcgm: diag -r {level} {test.get('name', '?')} "
                               f"failed{gpu}{detail}")
    return reasons


def route_device(text: str) -> str | None:
    """The interface of the default route in ``ip -j route show default``: the primary NIC."""
    routes = json.loads(text or "[]")
    return next((route["dev"] for route in routes if route.get("dev")), None)


def has_ipv4(text: str) -> bool:
    """Whether ``ip -j -4 addr show dev X`` lists an address."""
    return any(info.get("local") for link in json.loads(text or "[]")
               for info in link.get("addr_info", []))


# Checks: each returns its reasons; a command that fails is a reason of that check.

@dataclass
class Check:
    """The checks of one run, sharing its config, runner and what earlier steps learnt."""

    config: dict
    runner: Runner
    mode: str
    gpus: list[Gpu] = field(default_factory=list)
    #: The kernel log cursor to remember once the run's reasons have been delivered.
    cursor: str | None = None

    @property
    def gpu(self) -> dict | None:
        """The nodeset's GPU expectations, None on CPU nodesets and with ``gpu: off``."""
        return self.config.get("gpu")

    def guarded(self, prefix: str, check) -> list[str]:
        """``check()``'s reasons, or one reason under ``prefix`` when its command failed."""
        try:
            return check()
        except CommandFailed as exc:
            return [f"{PREFIX}{prefix}: {exc}"]
        except ValueError as exc:
            return [f"{PREFIX}{prefix}: {exc}"]

    def nvidia_smi(self) -> list[str]:
        """Count, model and ECC first (one query); remap, NVLink and Xids use its GPUs."""
        gpu = self.gpu
        reasons = self.guarded("gpu-count", lambda: self.query_gpus(gpu))
        if not self.gpus:
            return reasons
        later = [("gpu-remap", self.row_remap), ("gpu-xid", self.xids)]
        if gpu.get("nvlink"):
            later.append(("gpu-nvlink", self.nvlink))
        with ThreadPoolExecutor(len(later)) as pool:
            for found in pool.map(lambda step: self.guarded(*step), later):
                reasons += found
        return reasons

    def query_gpus(self, gpu: dict) -> list[str]:
        """One query for count, model and ECC; the GPUs it lists name the later reasons."""
        text = self.runner.run(["nvidia-smi", f"--query-gpu={GPU_QUERY}",
                                "--format=csv,noheader,nounits"])
        self.gpus = parse_gpus(text)
        return gpu_reasons(self.gpus, gpu["count"], gpu["model"])

    def row_remap(self) -> list[str]:
        """A pending remap needs a GPU reset, a failed one a new GPU: both drain."""
        text = self.runner.run(["nvidia-smi", f"--query-remapped-rows={REMAP_QUERY}",
                                "--format=csv,noheader,nounits"])
        return remap_reasons(text, self.gpus)

    def nvlink(self) -> list[str]:
        """The error counters of every link of every GPU (``-e``; ``-sc`` is deprecated)."""
        text = self.runner.run(["nvidia-smi", "nvlink", "-e"])
        return nvlink_reasons(text, self.gpu["count"],
                              self.config.get("nvlink_error_threshold", 0))

    def xids(self) -> list[str]:
        """Xids in the kernel log of this boot since the last delivered run."""
        argv = ["journalctl", "-k", "-b", "0", "-q", "--no-pager", "-o", "short-iso",
                "--show-cursor"]
        previous = read_state(self.config).get("cursor")
        if previous:
            argv.append(f"--after-cursor={previous}")
        text = self.runner.run(argv)
        self.cursor = last_cursor(text) or previous
        for bus, xid in parse_xids(text):
            if xid in APPLICATION_XIDS:
                log(f"Xid {xid} on {bus} ({APPLICATION_XIDS[xid]}): an application error, "
                    "not drained")
        return xid_reasons(parse_xids(text), self.gpus)

    def dcgm(self, level: int) -> list[str]:
        """The DCGM diagnostic at ``level``; it exits non-zero when a test fails, so its
        JSON report is read first and the exit code speaks only where there is none."""
        argv = ["dcgmi", "diag", "-r", str(level), "-j"]

        def diag() -> list[str]:
            done = self.runner.call(argv, timeout=DCGM_S[level])
            reasons = dcgm_reasons(done.stdout, level)
            if done.returncode and reasons == dcgm_reasons("", level):
                return [f"{PREFIX}gpu-dcgm: {failure(argv, done)}"]
            return reasons
        return self.guarded("gpu-dcgm", diag)

    def disks(self) -> list[str]:
        """Free space on each disk of the config; one mounted only sometimes (the local
        SSD) is checked where it is mounted."""
        reasons = []
        for disk in self.config.get("disks", []):
            path = disk["path"]
            if disk.get("if_mounted") and not os.path.ismount(path):
                continue
            try:
                stat = os.statvfs(path)
            except OSError as exc:
                reasons.append(f"{PREFIX}disk: {path}: {exc.strerror or exc}")
                continue
            free = stat.f_bavail * stat.f_frsize / 2**30
            if free < disk["min_free_gib"]:
                reasons.append(f"{PREFIX}disk: {path} has {free:.1f} GiB free, needs "
                               f"{disk['min_free_gib']}")
        return reasons

    def mount(self, path: str) -> list[str]:
        """``path`` is a mount point and a file can be written there, within MOUNT_S."""
        try:
            done = subprocess.run([sys.executable, "-c", MOUNT_PROBE, path],
                                  capture_output=True, text=True, timeout=MOUNT_S)
        except subprocess.TimeoutExpired:
            return [f"{PREFIX}mount: {path} did not answer within {MOUNT_S}s"]
        if done.returncode:
            said = done.stdout.strip() or f"probe failed (exit {done.returncode})"
            return [f"{PREFIX}mount: {path} {said}"]
        return []

    def nic(self) -> list[str]:
        """The primary NIC (the default route's) has an IPv4 address: without one the node
        cannot reach the controller or storage."""
        def addressed() -> list[str]:
            device = route_device(self.runner.run(["ip", "-j", "route", "show", "default"]))
            if device is None:
                return [f"{PREFIX}nic: no default route, so no primary NIC"]
            if not has_ipv4(self.runner.run(["ip", "-j", "-4", "addr", "show", "dev",
                                             device])):
                return [f"{PREFIX}nic: the primary NIC {device} has no IPv4 address"]
            return []
        return self.guarded("nic", addressed)

    def tools(self) -> list[str]:
        """Fail closed: the GPU tools the checks need must be installed."""
        return [f"{PREFIX}gpu-tools: {tool} is not on PATH" for tool in ("nvidia-smi", "dcgmi")
                if shutil.which(tool) is None]

    def steps(self, dcgm_level: int | None) -> list:
        """What this run checks: the node's disks, mounts and NIC, then its GPUs."""
        steps = [self.disks, self.nic]
        steps += [lambda path=path: self.mount(path) for path in self.config.get("mounts", [])]
        if self.gpu:
            missing = self.tools()
            steps.append(lambda: missing)
            if not missing:
                steps.append(self.nvidia_smi)
                if dcgm_level:
                    steps.append(lambda: self.dcgm(dcgm_level))
        return steps

    def run(self, dcgm_level: int | None) -> list[str]:
        """Every step at once (they wait on different devices); reasons in step order."""
        steps = self.steps(dcgm_level)
        with ThreadPoolExecutor(len(steps)) as pool:
            return [reason for found in pool.map(lambda step: step(), steps)
                    for reason in found]


# State: the kernel log cursor, so that each Xid is reported once per occurrence.

def read_state(config: dict) -> dict:
    """The saved state; empty when there is none or it cannot be read."""
    try:
        with open(config["state_file"], encoding="utf-8") as handle:
            state = json.load(handle)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def write_state(config: dict, cursor: str | None) -> None:
    """Remember the cursor atomically (a killed run never leaves half a file)."""
    if cursor is None:
        return
    path = config["state_file"]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(f"{path}.tmp", "w", encoding="utf-8") as handle:
        json.dump({"cursor": cursor}, handle)
    os.replace(f"{path}.tmp", path)


# Draining.

def joined(reasons: list[str], limit: int = REASON_MAX) -> str:
    """Reasons joined with "; ", cut at a whole reason to fit ``limit`` characters."""
    text = reasons[0][:limit]
    for count, reason in enumerate(reasons[1:], start=1):
        left = len(reasons) - count - 1
        tail = f"; +{left} more" if left else ""
        if len(text) + 2 + len(reason) + len(tail) > limit:
            return f"{text}; +{len(reasons) - count} more"
        text += f"; {reason}"
    return text


def node_name() -> str:
    """The Slurm node name: SLURMD_NODENAME where slurmd runs us, else the short hostname
    (a dynamic node registers under its hostname)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def drain(runner: Runner, node: str, reasons: list[str]) -> bool:
    """Drain ``node`` with ``reasons``; True once Slurm holds it drained with them.

    A node an operator drained for another reason keeps that reason: overwriting it with a
    ``cp:`` one would hand the node to the remediation loop.
    """
    reason = joined(reasons)
    try:
        shown = runner.run(["scontrol", "show", "node", node, "-o"])
        current = re.search(r"\bReason=(.*?)(?: \[|\s+\w+=|$)", shown)
        state = re.search(r"\bState=(\S+)", shown)
        drained = state is not None and "DRAIN" in state[1]
        if drained and current and not current[1].startswith(PREFIX):
            log(f"{node} is already drained by someone else ({current[1]}); left as it is")
            return True
        if drained and current and current[1] == reason:
            return True
        runner.run(["scontrol", "update", f"nodename={node}", "state=drain",
                    f"reason={reason}"])
    except CommandFailed as exc:
        log(f"could not drain {node}: {exc}")
        return False
    log(f"drained {node}: {reason}")
    return True


def log(message: str) -> None:
    """What the program did, on stderr (slurmd and the journal keep it); stdout holds
    only the reasons."""
    print(f"healthcheck: {message}", file=sys.stderr)


def job_failed(environ: dict[str, str]) -> bool:
    """Whether the job the epilog follows failed: its script's exit code or signal
    (SLURM_JOB_EXIT_CODE2 ``code:signal``, else the raw SLURM_JOB_EXIT_CODE status),
    as slurmd sets them for the epilog."""
    code2 = environ.get("SLURM_JOB_EXIT_CODE2")
    if code2:
        return code2 != "0:0"
    status = environ.get("SLURM_JOB_EXIT_CODE")
    return bool(status) and status != "0"


def dcgm_level(config: dict, mode: str) -> int | None:
    """The DCGM diagnostic a mode runs: none between jobs (it would disturb a running
    job), level 1 before a job and by hand, level 2 after a failed job (``thorough``)."""
    gpu = config.get("gpu") or {}
    if mode == "epilog":
        return gpu.get("dcgm_level_after_failure")
    return None if mode == "interval" else gpu.get("dcgm_level")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="healthcheck-<nodeset>.json")
    parser.add_argument("--no-drain", action="store_true",
                        help="only report: no scontrol, and the kernel log is read again "
                             "next time")
    parser.add_argument("--mode", choices=sorted(BUDGET_S), default="all",
                        help="all: every check once (default); interval: no DCGM "
                             "diagnostic (HealthCheckProgram); prolog: before a job; "
                             "epilog: after a job, checking only after a failed one")
    args = parser.parse_args(argv)
    runner = Runner(time.monotonic() + BUDGET_S[args.mode])
    try:
        with open(args.config, encoding="utf-8") as handle:
            config = json.load(handle)
        if not isinstance(config, dict) or "state_file" not in config:
            raise ValueError("not a health check config")
    except (OSError, ValueError) as exc:
        config, reasons = None, [f"{PREFIX}config: cannot read {args.config}: {exc}"[:120]]
    else:
        runner.timeout = config.get("command_timeout_s", COMMAND_S)
        if args.mode == "epilog" and not job_failed(dict(os.environ)):
            return 0
        check = Check(config, runner, args.mode)
        try:
            reasons = check.run(dcgm_level(config, args.mode))
        except (KeyError, TypeError, AttributeError) as exc:
            reasons = [f"{PREFIX}config: {args.config} is not a health check config "
                       f"({type(exc).__name__}: {exc})"[:160]]
    for reason in reasons:
        print(reason)
    delivered = not reasons or (not args.no_drain and drain(runner, node_name(), reasons))
    if config is not None and delivered and not args.no_drain:
        write_state(config, check.cursor)
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
