"""The images clusterprint builds: named by their install script's content and nothing of a
cluster, each install script clean for bash and shellcheck, installing every part once on a
builder VM of the boot sandbox (a second run changes nothing), failing naming its step, and
leaving an image whose nodes boot installing nothing.

The builder is tests/support/boot_sandbox.py's VM of the bare base image; its stubs answer at
once and fake what apt, git, make, DKMS and Docker would leave. What only a real builder VM
shows: that the packages and Slurm's source build (its configure finding every library),
the image's size and how long a build takes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings

from clusterprint.blueprint.model import Blueprint
from clusterprint.blueprint.validate import check_text, load_checked
from clusterprint.facts import gpu_software, images, machines, ops_agent, slurm
from clusterprint.render import images as node_images
from clusterprint.render import node_software, rendered_files
from tests.support.boot_sandbox import Node, ready
from tests.support.drawn_blueprints import blueprints
from tests.support.paths import blueprint_path, reference_blueprints

#: Every kind of image some machine family boots, and the images the reference blueprints need.
KINDS = sorted({node_images.kind_of(f.machine_type) for f in machines.MACHINE_FAMILIES}
               | {"cpu"})
REFERENCE_IMAGES = {image.name: image for path in reference_blueprints()
                    for image in node_images.needed_images(load_checked(str(path)))}
RELEASE = os.uname().release
DOWNLOADS = "/var/cache/clusterprint"
APT = "apt-get -q -y -o DPkg::Lock::Timeout=600"


def edited(name: str, edit: Callable[[dict], None]) -> Blueprint:
    """Reference blueprint ``name`` with ``edit`` applied to its document, checked again."""
    document = load_checked(blueprint_path(name)).model_dump(mode="json", exclude_none=True)
    edit(document)
    checked = check_text(f"{name}.json", json.dumps(document), is_json=True)
    assert checked.ok and checked.blueprint, [f.line_text() for f in checked.findings]
    return checked.blueprint


def image_names(blueprint: Blueprint) -> list[str]:
    return [image.name for image in node_images.needed_images(blueprint)]


def renamed(document: dict) -> None:
    document["name"] = "other"
    document["labels"] = {"cluster": "other"}


def moved(document: dict) -> None:
    document["project"] = "another-project"
    document["slurm"]["nodesets"][0]["reservation"] = (
        "projects/another-project/reservations/a3mega-res")


def no_shared_storage(document: dict) -> None:
    document["storage"] = {"home": {"filestore": {"tier": "BASIC_SSD", "capacity_gib": 2560}},
                           "protect": False}


def repartitioned(document: dict) -> None:
    document["slurm"]["partitions"] = [{"name": "train", "nodesets": ["a3mega"]}]
    document["recipes"] = [{**document["recipes"][0], "partition": "train"}]


@pytest.mark.parametrize("edit", [renamed, moved, no_shared_storage, repartitioned])
def test_clusters_that_differ_in_what_is_their_own_need_the_same_images(edit):
    assert image_names(edited("a3mega", edit)) == image_names(load_checked(
        blueprint_path("a3mega")))


def test_another_gpu_family_needs_another_image_and_the_same_software_the_same_one():
    a3mega, a3ultra, a4, cpu = (set(image_names(load_checked(blueprint_path(name))))
                                for name in ("a3mega", "a3ultra", "a4", "cpu-small"))
    assert a3mega & a4 == a3mega & a3ultra == cpu == {node_images.node_image("cpu").name}
    assert a3ultra == a4  # both RDMA on x86: one image
    assert len(a3mega - cpu) == len(a4 - cpu) == 1 and a3mega != a4
    assert len({node_images.node_image(kind).name for kind in KINDS}) == len(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_an_image_is_named_by_its_kind_and_the_digest_of_its_script(kind):
    image = node_images.node_image(kind)
    assert re.fullmatch(rf"clusterprint-{kind}-[0-9a-f]{{12}}", image.name)
    assert image.family == f"{images.FAMILY_PREFIX}{kind}"
    assert image.script_path == f"images/{image.name}.sh"
    assert f"image {image.name} installed" in image.script


@pytest.mark.parametrize("change", [
    pytest.param(lambda mp: mp.setattr(node_software, "BASE_PACKAGES",
                                       (*node_software.BASE_PACKAGES, "htop")), id="a package"),
    pytest.param(lambda mp: mp.setattr(slurm, "SLURM_COMMIT", "0" * 40), id="Slurm's commit"),
    pytest.param(lambda mp: mp.setattr(images, "CPU_BASE", images.GPU_BASES["x86_64"]),
                 id="the base image"),
])
def test_a_change_of_content_is_a_new_image_name(monkeypatch, change):
    before = {kind: node_images.node_image(kind) for kind in KINDS}
    node_images.node_image.cache_clear()
    change(monkeypatch)
    try:
        after = {kind: node_images.node_image(kind) for kind in KINDS}
    finally:
        node_images.node_image.cache_clear()
    changed = {kind for kind in KINDS if after[kind].script != before[kind].script}
    assert changed, "the change reached no install script"
    assert {kind for kind in KINDS if after[kind].name != before[kind].name} == changed


@given(blueprints())
@settings(max_examples=25, deadline=None)
def test_every_image_a_drawn_blueprint_needs_is_one_of_the_kinds(drawn):
    blueprint, _ = drawn
    needed = node_images.needed_images(blueprint)
    assert node_images.node_image("cpu") in needed
    assert {image.name for image in needed} <= {node_images.node_image(k).name for k in KINDS}
    files = rendered_files(blueprint)
    assert sorted(n for n in files if n.startswith("images/")) == sorted(
        image.script_path for image in needed)


@pytest.mark.parametrize("kind", KINDS)
def test_each_install_script_parses_and_passes_shellcheck(kind, tmp_path):
    script = tmp_path / f"{kind}.sh"
    script.write_text(node_images.node_image(kind).script)
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr
    checked = subprocess.run(["shellcheck", "--severity=style", "--shell=bash", str(script)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_the_reference_blueprints_need_a_cpu_image_and_one_per_gpu_fabric():
    assert sorted(image.kind for image in REFERENCE_IMAGES.values()) == [
        "cpu", "gpu-rdma", "gpu-tcpxo"]


# --- The install scripts on a builder VM ---

@pytest.fixture
def builder(sandbox, tmp_path) -> Node:
    """A builder VM: the bare base image, none of the parts."""
    return Node(tmp_path, built=False)


def installed(node: Node, kind: str) -> subprocess.CompletedProcess:
    """Run the install script of ``kind`` on ``node``; it must succeed."""
    done = node.install(node_images.node_image(kind))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done


def builds(calls: list[str]) -> list[str]:
    """The calls that build software."""
    return [c for c in calls if c.startswith(("make", "configure", "dkms", "git", "ldconfig",
                                              "tar", "python3 -m venv", "useradd"))]


@pytest.mark.parametrize("kind", KINDS)
def test_an_install_script_installs_every_part_once_and_a_second_run_changes_nothing(
        builder, kind):
    image = node_images.node_image(kind)
    done = installed(builder, kind)
    steps = re.findall(r"^step: (\w+)$", done.stdout, re.MULTILINE)
    assert steps == [*image.parts, "hold", "manifest"]
    manifest = json.loads(builder.file(node_images.MANIFEST).read_text())
    assert manifest == {"name": image.name, "family": image.family, "base": image.base.path,
                        "slurm": slurm.SLURM_VERSION, "parts": list(image.parts)}
    assert builder.installs()
    builder.calls()

    tree, installs = builder.tree(), len(builder.installs())
    again = installed(builder, kind)
    assert builder.installs()[installs:] == []
    assert builds(builder.calls()) == []
    assert builder.tree() == tree
    assert "wrote " not in again.stdout


#: The roles each kind's image serves in the reference blueprints: what a VM of that image,
#: just built, boots (installing nothing).
SERVES = {"cpu": [("cpu-small", "controller"), ("cpu-small", "login"),
                  ("cpu-small", "compute-cpu"), ("a4", "controller"), ("a3mega", "login")],
          "gpu-tcpxo": [("a3mega", "compute-a3mega")],
          "gpu-rdma": [("a3ultra", "compute-a3ultra"), ("a4", "compute-a4")]}


@pytest.mark.parametrize(("kind", "blueprint", "script"),
                         [(kind, *role) for kind, roles in SERVES.items() for role in roles])
def test_a_vm_of_an_image_just_built_boots_installing_nothing(builder, kind, blueprint, script):
    installed(builder, kind)
    ready(builder, blueprint).forbid_installs()
    builder.booted_from(rendered_files(load_checked(blueprint_path(blueprint))), script)
    assert builder.refused() == []
    assert f"image: {node_images.node_image(kind).name} holds every part" in builder.journal()


def test_the_cpu_image_builds_slurm_from_schedmds_commit_with_every_plugin(builder):
    installed(builder, "cpu")
    calls = builder.calls()
    tree = f"{DOWNLOADS}/slurm-{slurm.SLURM_VERSION}"
    build = [c for c in calls if c.startswith(("git", "configure", "make -C " + tree,
                                               "ldconfig", "useradd"))]
    assert build[:8] == [
        f"git init -q {tree}",
        f"git -C {tree} fetch -q --depth 1 {slurm.SLURM_REPOSITORY} {slurm.SLURM_COMMIT}",
        f"git -C {tree} checkout -q FETCH_HEAD",
        f"git -C {tree} rev-parse HEAD",
        "configure -q " + " ".join(node_images.SLURM_CONFIGURE),
        f"make -C {tree} -s -j {len(os.sched_getaffinity(0))}",
        f"make -C {tree} -s install",
        "ldconfig"]
    # Its build dependencies, but those an earlier part installed (munge's library).
    wanted = [p for p in node_images.SLURM_BUILD_PACKAGES if p not in node_software.MUNGE_PACKAGES]
    assert f"{APT} install {' '.join(wanted)}" in builder.installs()
    for plugin in node_images.SLURM_PLUGINS:
        assert builder.file(f"{node_images.SLURM_PLUGIN_DIR}/{plugin}.so").exists(), plugin
    assert not builder.file(tree).exists()  # the build tree is not kept in the image
    assert "systemctl disable slurmctld slurmd slurmdbd slurmrestd" in calls
    assert "systemctl disable munge" in calls and "systemctl disable mariadb" in calls
    assert 'APT::Periodic::Unattended-Upgrade "0";' in builder.file(
        "/etc/apt/apt.conf.d/20auto-upgrades").read_text()


def distro() -> str:
    """This machine's os-release as NVIDIA's repository folders name it (ubuntu2404)."""
    release = dict(line.split("=", 1) for line in
                   Path("/etc/os-release").read_text().splitlines() if "=" in line)
    return release["ID"].strip('"') + release["VERSION_ID"].strip('"').replace(".", "")


def os_release(key: str) -> str:
    return re.search(rf"^{key}=\"?([^\"\n]+)", Path("/etc/os-release").read_text(), re.M)[1]


def test_a_gpu_image_gets_dcgm_for_its_drivers_cuda_enroot_and_pyxis(builder):
    installed(builder, "gpu")
    installs = builder.installs()
    repository = f"https://developer.download.nvidia.com/compute/cuda/repos/{distro()}/x86_64"
    keyring = f"{DOWNLOADS}/cuda-keyring_1.1-1_all.deb"
    cuda = images.GPU_BASES["x86_64"].cuda_major
    releases = "https://github.com/NVIDIA/enroot/releases/download/v4.1.2"
    enroot = [f"{DOWNLOADS}/enroot_4.1.2-1_amd64.deb",
              f"{DOWNLOADS}/enroot+caps_4.1.2-1_amd64.deb"]
    gpu = installs[installs.index(f"curl -fsSL -o {keyring}.part {repository}/"
                                  "cuda-keyring_1.1-1_all.deb"):]
    assert gpu == [
        f"curl -fsSL -o {keyring}.part {repository}/cuda-keyring_1.1-1_all.deb",
        f"dpkg -i {keyring}",
        f"{APT} update",
        f"{APT} install datacenter-gpu-manager-4-cuda{cuda}",
        *(f"curl -fsSL -o {deb}.part {releases}/{deb.rsplit('/', 1)[1]}" for deb in enroot),
        f"{APT} install {' '.join(enroot)}"]
    assert (f"curl -fsSL -o {DOWNLOADS}/pyxis-0.24.0.tar.gz.part"
            " https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.24.0.tar.gz") in installs
    calls = builder.calls()
    assert f"make -C {DOWNLOADS}/pyxis-0.24.0.tar.gz.d install" in calls
    assert f"apt-mark hold datacenter-gpu-manager-4-cuda{cuda}" in calls
    assert builder.file(gpu_software.PYXIS_PLUGIN).exists()


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_every_image_gets_the_ops_agent_once_from_googles_repository_left_disabled(builder,
                                                                                  kind):
    installed(builder, kind)
    installs, calls = builder.installs(), builder.calls()
    key = installs.index("curl -fsSL -o /etc/apt/keyrings/google-cloud-ops-agent.asc "
                         "https://packages.cloud.google.com/apt/doc/apt-key.gpg")
    assert installs[key + 1:key + 3] == [f"{APT} update", f"{APT} install google-cloud-ops-agent"]
    assert sources(builder)["google-cloud-ops-agent"].endswith(
        "] https://packages.cloud.google.com/apt google-cloud-ops-agent-"
        f"{os_release('VERSION_CODENAME')}-all main\n")
    assert builder.file(ops_agent.ENGINE).exists()
    # Each boot enables it with its role's configuration: the image starts none.
    assert "systemctl disable google-cloud-ops-agent" in calls
    assert "ops_agent" in json.loads(builder.file(node_images.MANIFEST).read_text())["parts"]
    installed(builder, kind)
    assert [c for c in builder.installs()[len(installs):] if "ops-agent" in c] == []


def sources(node: Node) -> dict[str, str]:
    """The apt sources the script added, by file name."""
    folder = node.file("/etc/apt/sources.list.d/x").parent
    return {p.stem: p.read_text() for p in folder.glob("*.list")}


def apt(installs: list[str], verb: str) -> list[str]:
    """What apt-get was asked to ``verb`` (install, download), one entry per call."""
    return [c.split(f" {verb} ", 1)[1] for c in installs
            if c.startswith("apt-get") and f" {verb} " in c]


GIB = "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main"
TCPXO = "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main"
PLUGIN = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.17"
RXDM = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.23"
#: The apt sources every GPU image adds before its fabric's: Google's for its file systems
#: and Ops Agent.
GOOGLE = {"lustre-client", "gcsfuse", "google-cloud-ops-agent"}


def test_the_tcpxo_image_gets_gpudirect_tcpxo(builder):
    installed(builder, "gpu-tcpxo")
    added = sources(builder)
    assert set(added) - GOOGLE == {"docker", "apt-transport-artifact-registry",
                                   "gpudirect-tcpxo"}
    assert added["docker"] == (
        f"deb [signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/"
        f"{os_release('ID')} {os_release('VERSION_CODENAME')} stable\n")
    assert added["gpudirect-tcpxo"] == (
        f"deb [signed-by=/etc/apt/keyrings/gpudirect-tcpxo.asc] {TCPXO}\n")
    installs = builder.installs()
    assert apt(installs, "install")[-2:] == [
        "apt-transport-artifact-registry",
        f"docker-ce docker-ce-cli containerd.io nvidia-container-toolkit dkms "
        f"linux-headers-{RELEASE}"]
    assert apt(installs, "download") == ["dmabuf-import-helper"]
    # The 1.1 package's source builds on kernels from 6.13 on only once patched.
    patched = (builder.fake / "dkms-source" / "import-helper.c").read_text()
    major, minor = (int(x) for x in RELEASE.split(".")[:2])
    assert ('MODULE_IMPORT_NS("DMA_BUF")' in patched) == ((major, minor) >= (6, 13))
    calls = builder.calls()
    assert [c.split()[1] for c in calls if c.startswith("dkms")] == [
        "status", "add", "build", "install"]
    rule = builder.file(gpu_software.TCPXO.udev_rule.path).read_text()
    assert rule == gpu_software.TCPXO.udev_rule.text
    assert [c for c in installs if c.startswith("docker")] == [
        f"docker run --rm --name nccl-installer --network=host --volume /var/lib:/var/lib "
        f"{PLUGIN} install --install-nccl", f"docker pull {RXDM}"]
    assert builder.file("/var/lib/tcpxo/lib64/nccl-env-profile.sh").exists()


@pytest.mark.parametrize("kind", ["gpu-rdma", "gpu-rdma-arm64"])
def test_an_rdma_image_gets_nccl_and_gib_pinned_and_held(builder, kind):
    installed(builder, kind)
    added = sources(builder)
    assert set(added) - GOOGLE == {"apt-transport-artifact-registry", "gpudirect-gib"}
    assert added["gpudirect-gib"] == f"deb [signed-by=/etc/apt/keyrings/gpudirect-gib.asc] {GIB}\n"
    assert apt(builder.installs(), "install")[-2:] == [
        "apt-transport-artifact-registry",
        "libnccl2=2.27.5-1+cuda12.9 libnccl-dev=2.27.5-1+cuda12.9 nccl-gib=1.1.0 "
        "ibverbs-utils rdma-core"]
    assert [c for c in builder.calls() if c.startswith("apt-mark hold lib", )] == [
        "apt-mark hold libnccl2", "apt-mark hold libnccl-dev"]


def test_images_without_fabric_software_hold_no_fabric_part():
    for kind in ("cpu", "gpu"):
        assert "fabric" not in node_images.node_image(kind).parts
        assert "install_fabric" not in node_images.node_image(kind).script


def test_a_fabric_with_nothing_to_install_shares_the_plain_gpu_image():
    """GPUDirect-TCPX installs nothing (gpu_software.TCPX): A3 High boots the A2/G2 image."""
    assert node_images.kind_of("a3-highgpu-8g") == node_images.kind_of("g2-standard-24") == "gpu"
    with pytest.raises(ValueError, match="no machine type is of image kind 'gpu-tcpx'"):
        node_images.node_image("gpu-tcpx")


# --- A step that fails names itself ---

def broken(call: str):
    """The stub call containing ``call`` fails for good."""
    return lambda node: node.fail_for_good(call)


def absent(package: str):
    """The apt sources lack ``package``."""
    def lacking(node: Node) -> None:
        (node.fake / "absent").write_text(package + "\n")
        node.no_retries()
    return lacking


def moved_tag(node: Node) -> None:
    """SchedMD's remote hands out another commit than the one pinned."""
    (node.fake / "git-commit").write_text("1" * 40 + "\n")


def missing_plugin(node: Node) -> None:
    """Slurm's build leaves gpu/nvidia out (its configure found no NVML header)."""
    plugins = node.fake / "slurm-plugins"
    plugins.write_text(plugins.read_text().replace("gpu_nvidia\n", ""))


V = slurm.SLURM_VERSION
CUDA_REPO = f"https://developer.download.nvidia.com/compute/cuda/repos/{distro()}/x86_64"
FAILED_STEPS = [
    pytest.param("cpu", broken(" update"), "base", "apt-get update: still failing after 0s",
                 id="archive down"),
    pytest.param("cpu", absent("mdadm"), "base", "software: no package mdadm in this image's "
                 "apt sources", id="base package missing"),
    pytest.param("cpu", broken(" install munge"), "munge", "apt-get install munge libmunge-dev: "
                 "still failing after 0s", id="munge does not install"),
    pytest.param("cpu", broken("git -C"), "slurm", f"download Slurm {V} ({slurm.SLURM_COMMIT}): "
                 "still failing after 0s", id="SchedMD unreachable"),
    pytest.param("cpu", moved_tag, "slurm", f"software: the Slurm source fetched is not commit "
                 f"{slurm.SLURM_COMMIT}", id="another commit"),
    pytest.param("cpu", broken("configure"), "slurm", f"software: Slurm {V}: configure failed",
                 id="configure fails"),
    pytest.param("cpu", broken(" -s -j "), "slurm", f"software: Slurm {V}: make failed",
                 id="make fails"),
    pytest.param("cpu", missing_plugin, "slurm", f"software: Slurm {V} was built without "
                 "gpu_nvidia (a build dependency is missing)", id="plugin missing"),
    pytest.param("cpu", broken("lustre-client.asc"), "lustre", "download the signing key of "
                 "lustre-client: still failing after 0s", id="lustre key down"),
    pytest.param("cpu", absent(f"lustre-client-modules-{RELEASE}"), "lustre",
                 f"software: no package lustre-client-modules-{RELEASE} in Google's "
                 "lustre-client repository", id="no lustre modules for the kernel"),
    pytest.param("cpu", broken("pip install"), "tensorboard", "tensorboard: pip install "
                 f"{node_software.TENSORBOARD_UPLOADER_PACKAGE}: still failing after 0s",
                 id="PyPI down"),
    pytest.param("cpu", broken("pyxis-0.24.0"), "pyxis", "download pyxis-0.24.0.tar.gz from "
                 "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.24.0.tar.gz: still "
                 "failing after 0s", id="pyxis source down"),
    pytest.param("cpu", broken("pyxis-0.24.0.tar.gz.d install"), "pyxis", "software: building "
                 f"pyxis 0.24.0 against slurm {V} failed", id="pyxis does not build"),
    pytest.param("gpu", broken("enroot_4.1.2-1_amd64.deb"), "gpu", "download "
                 "enroot_4.1.2-1_amd64.deb from https://github.com/NVIDIA/enroot/releases/"
                 "download/v4.1.2/enroot_4.1.2-1_amd64.deb: still failing after 0s",
                 id="enroot release down"),
    pytest.param("gpu", broken("cuda-keyring"), "gpu", "download cuda-keyring_1.1-1_all.deb "
                 f"from {CUDA_REPO}/cuda-keyring_1.1-1_all.deb: still failing after 0s",
                 id="CUDA repository down"),
    pytest.param("gpu", absent("datacenter-gpu-manager-4-cuda13"), "gpu", "software: no "
                 "package datacenter-gpu-manager-4-cuda13 in NVIDIA's CUDA repository "
                 f"{CUDA_REPO}", id="DCGM missing"),
    *(pytest.param(kind, absent("google-cloud-ops-agent"), "ops_agent", "software: no package "
                   "google-cloud-ops-agent in Google's Ops Agent repository https://packages."
                   "cloud.google.com/apt google-cloud-ops-agent-"
                   f"{os_release('VERSION_CODENAME')}-all main", id=f"Ops Agent missing ({kind})")
      for kind in ("cpu", "gpu")),
]


def labelled(source: gpu_software.AptSource) -> str:
    return f"repository {source.name} ({source.line})"


FAILED_STEPS += [
    pytest.param("gpu-rdma", broken("sourcelist=sources.list.d/gpudirect-gib.list"), "fabric",
                 f"fabric: apt-get update of {labelled(gpu_software.GIB_APT)}: still failing "
                 "after 0s", id="gIB repository down"),
    pytest.param("gpu-rdma", absent("nccl-gib=1.1.0"), "fabric", "fabric: no package "
                 f"nccl-gib=1.1.0 in {labelled(gpu_software.GIB_APT)}", id="gIB missing"),
    pytest.param("gpu-rdma", absent("libnccl2=2.27.5-1+cuda12.9"), "fabric", "fabric: no "
                 f"package libnccl2=2.27.5-1+cuda12.9 in repository cuda ({CUDA_REPO}/ /)",
                 id="NCCL missing"),
    pytest.param("gpu-tcpxo", absent(f"linux-headers-{RELEASE}"), "fabric", "fabric: no "
                 f"package linux-headers-{RELEASE} in this image's apt sources (kernel "
                 f"{RELEASE})", id="kernel headers missing"),
    pytest.param("gpu-tcpxo", absent("apt-transport-artifact-registry"), "fabric",
                 "fabric: no package apt-transport-artifact-registry in "
                 f"{labelled(gpu_software.AR_TRANSPORT)}", id="AR transport missing"),
    pytest.param("gpu-tcpxo", broken(" download "), "fabric", "fabric: download "
                 f"dmabuf-import-helper from {labelled(gpu_software.TCPXO_APT)}: still failing "
                 "after 0s", id="dmabuf download fails"),
    pytest.param("gpu-tcpxo", broken("dkms build"), "fabric", "fabric: dkms could not build "
                 f"dmabuf-import-helper 1.1 for kernel {RELEASE}", id="dkms build fails"),
    pytest.param("gpu-tcpxo", broken("--name nccl-installer"), "fabric", "fabric: install the "
                 f"NCCL plugin from {PLUGIN}: still failing after 0s", id="plugin installer"),
    pytest.param("gpu-tcpxo", broken("docker pull"), "fabric", f"fabric: docker pull {RXDM}: "
                 "still failing after 0s", id="RxDM pull"),
]


@pytest.mark.parametrize(("kind", "breaks", "step", "failed"), FAILED_STEPS)
def test_a_failed_step_names_itself_and_leaves_no_finished_image(builder, kind, breaks, step,
                                                                failed):
    breaks(builder)
    done = builder.install(node_images.node_image(kind))
    assert done.returncode != 0
    lines = done.stdout.splitlines()
    assert lines[-1] == f"<3>FAILED: {failed}", lines[-4:]
    assert [line for line in lines if line.startswith("step: ")][-1] == f"step: {step}"
    assert not builder.file(node_images.MANIFEST).exists()
