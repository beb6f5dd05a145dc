#!/usr/bin/env bash
# build_slurm_root.sh CACHE: the root file system the real-daemon tests run Slurm from
# (tests/support/slurm_root.py), in CACHE/root: Debian unstable's Slurm 26.05 (the series the
# images build, clusterprint/facts/slurm.py), munge, and what the tests run inside it (python3
# for the node programs, iproute2 for the health check's `ip`; bash and coreutils come with
# minbase), and a user who submits jobs, `trainer` (uid 2000: tests/support/slurm_root.py's
# USER; Slurm 26.05 refuses jobs from `nobody`). CACHE/stamp holds this file's hash: a root
# built by another version of this recipe is built again, an up-to-date one is kept (about
# 30 s and 200 MB to build).
#
# Facts (read 2026-12 on deb.debian.org): unstable carries slurmctld, slurmd, slurmdbd,
# slurmrestd, slurm-client and munge 26.05.5-1; Debian ships auth/jwt and accounting_storage/
# mysql in plugin packages of their own; the mirror's unstable Release file is past its
# Valid-Until, and its InRelease verifies with Debian 12's debian-archive-keyring.
set -euo pipefail

readonly PACKAGES=(slurmctld slurmd slurmdbd slurmrestd slurm-client slurm-wlm-jwt-plugin
  slurm-wlm-mysql-plugin munge python3 iproute2)
readonly MIRROR=http://deb.debian.org/debian
readonly KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# shellcheck disable=SC2016 # mmdebstrap's hook shell expands $1 (the new root)
readonly USER_HOOK='chroot "$1" useradd --uid 2000 --user-group --no-create-home trainer'

cache=${1:?usage: build_slurm_root.sh CACHE}
recipe=$(sha256sum "$0" | cut -d' ' -f1)
if [[ -d $cache/root && $(cat "$cache/stamp" 2>/dev/null) == "$recipe" ]]; then
  exit 0
fi
mkdir -p "$cache"
rm -rf "$cache/root.new" "$cache/stamp"
echo "building the Slurm root in $cache/root (Debian unstable, mmdebstrap)" >&2
mmdebstrap --quiet --variant=minbase --mode=root --keyring="$KEYRING" \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" --customize-hook="$USER_HOOK" \
  unstable "$cache/root.new" "$MIRROR"
rm -rf "$cache/root"
mv "$cache/root.new" "$cache/root"
echo "$recipe" >"$cache/stamp"
