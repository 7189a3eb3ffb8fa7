#!/bin/sh
# Installs, with apt-get, exactly the Debian packages the QEMU testbed, the bootloader golden
# files and the operator image (mmdebstrap: its root filesystem) need, and only those that are
# missing. Idempotent and fast when everything is present
# (dpkg-query and a file test, no apt). `.ci/run` calls it before `npm test`.
set -eu

PACKAGES="
qemu-system-x86
ovmf
grub-efi-amd64-bin
grub-common
mtools
dosfstools
gdisk
e2fsprogs
busybox-static
mmdebstrap
"

missing=""
for p in $PACKAGES; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$status" in
    "install ok installed") ;;
    *) missing="$missing $p" ;;
  esac
done

# images/build.ts asks apt-cache which kernel package linux-image-amd64 depends on: that needs
# package lists (a file test, because apt-cache itself takes seconds on a busy machine).
lists_ok=0
for f in /var/lib/apt/lists/*_Packages*; do
  if [ -e "$f" ]; then lists_ok=1; fi
done

if [ -z "$missing" ] && [ "$lists_ok" = 1 ]; then
  exit 0
fi

echo "setup-debian: updating package lists; installing:${missing:- nothing}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine: one update, then install.
$SUDO apt-get update -qq
if [ -z "$missing" ]; then exit 0; fi
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
