#!/bin/sh
# enter_slurm_root.sh ROOT CHECKOUT MUNGE_SOCKET GPUS COMMAND...: COMMAND run from the Slurm
# root (tests/support/slurm_root.py), in the mount namespace of its own that
# `unshare --mount --propagation private` gave this script: every mount made here goes with
# the namespace's last process, and none reaches this machine's.
#
# This machine's /proc, /sys, /dev and /tmp (where the tests' folders are) and the checkout
# (the node programs) are at the same paths inside the root, so the paths in the configs hold.
# /run is a fresh tmpfs whose /run/munge/munge.socket.2 (the socket Slurm and munge are
# compiled to use) is MUNGE_SOCKET, unless that is empty. A non-empty GPUS is a folder of fake
# GPUs a node's gpu/nvidia finds: its dev/ becomes /dev, its driver/ /proc/driver (nvidia/
# gpus/BUS/information), its pci/ /sys/bus/pci/drivers (nvidia/BUS/local_cpulist).
set -eu
root=$1 checkout=$2 munge=$3 gpus=$4
shift 4
for path in /proc /sys /dev /tmp; do
  mount --rbind "$path" "$root$path"
done
mkdir -p "$root$checkout"
mount --bind "$checkout" "$root$checkout"
mount -t tmpfs -o mode=0755 clusterprint-run "$root/run"
if [ -n "$munge" ]; then
  mkdir -m 0755 "$root/run/munge"
  ln -s "$munge" "$root/run/munge/munge.socket.2"
fi
if [ -n "$gpus" ]; then
  mount --bind "$gpus/dev" "$root/dev"
  mount --bind "$gpus/driver" "$root/proc/driver"
  mount --bind "$gpus/pci" "$root/sys/bus/pci/drivers"
fi
# chroot starts in /: the command starts in the folder it was started from, as before.
# shellcheck disable=SC2016 # the inner shell expands them
exec chroot "$root" /bin/sh -c 'cd "$0" && exec "$@"' "$PWD" "$@"
