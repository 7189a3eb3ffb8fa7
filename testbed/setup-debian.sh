#!/bin/sh
# Installs, with apt-get, exactly the Debian packages the QEMU testbed (and its machine image:
# systemd-boot-efi for the systemd-boot ESP), the bootloader golden
# files and the operator image (mmdebstrap: its root filesystem) need, and releases from container
# images (e2fsprogs' mke2fs and debugfs make the slot's ext4; erofs-utils the EROFS compared in
# docs/adr/slot-filesystem-from-image.md; buildah and skopeo build and copy the OCI images those
# releases come from: the machine scenario's and the lab's releases are Containerfiles built by
# buildah, src/release/from-image/containerfile.ts), and only those that are missing.
# Idempotent and fast when everything is present
# (dpkg-query and a file test, no apt). `npm test` runs it first (the `pretest` script), so a
# fresh Debian machine needs nothing but `npm ci` before it; `.ci/run` calls it too.
set -eu

# Stops with what is missing and what a person can do about it (exit 1: npm test stops here).
cannot_install() {
  echo "setup-debian: cannot install the Debian packages the tests need: $1" >&2
  echo "setup-debian: missing:${missing:- (package lists only)}" >&2
  echo "setup-debian: run as root (sudo sh testbed/setup-debian.sh), or install them by hand:" >&2
  echo "  apt-get update && apt-get install --no-install-recommends${missing}" >&2
  exit 1
}

PACKAGES="
qemu-system-x86
ovmf
grub-efi-amd64-bin
grub-common
systemd-boot-efi
mtools
dosfstools
gdisk
e2fsprogs
busybox-static
mmdebstrap
erofs-utils
buildah
skopeo
"

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup-debian: no dpkg-query: not a Debian or Ubuntu machine; install the equivalents of:" >&2
  echo "  "$PACKAGES >&2
  exit 1
fi

missing=""
for p in $PACKAGES; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$status" in
    "install ok installed") ;;
    *) missing="$missing $p" ;;
  esac
done

# testbed/build.ts asks apt-cache which kernel package linux-image-amd64 depends on: that needs
# package lists (a file test, because apt-cache itself takes seconds on a busy machine).
lists_ok=0
for f in /var/lib/apt/lists/*_Packages*; do
  if [ -e "$f" ]; then lists_ok=1; fi
done

if [ -z "$missing" ] && [ "$lists_ok" = 1 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || cannot_install "not root, and no sudo"
  # -n: never stop at a password prompt in the middle of npm test.
  sudo -n true 2>/dev/null || cannot_install "not root, and sudo asks for a password"
  SUDO="sudo -n"
fi
echo "setup-debian: updating package lists; installing:${missing:- nothing}" >&2
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine: one update, then install.
$SUDO apt-get update -qq || cannot_install "apt-get update failed (see above)"
if [ -z "$missing" ]; then exit 0; fi
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
  cannot_install "apt-get install failed (see above)"
