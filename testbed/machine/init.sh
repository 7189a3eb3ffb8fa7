#!/bin/busybox sh
# The machine's initrd /init (busybox-static; testbed/machine/initrd.ts builds it). It loads the
# kernel modules the guest needs (lib/modules/order), finds the root partition named by
# root=PARTLABEL=<label> on the kernel command line (the kernel's uevent files carry PARTNAME,
# so no udev is needed here), says on the console which slot, release and kind of boot this is,
# and hands over to the slot's /sbin/init (systemd).
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
# Whose initrd this is (initrd.ts writes the release's version): said before anything can fail.
echo "LIKEN-INITRD version=$(/bin/busybox cat /etc/liken-initrd-version)"
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys

fail() {
  echo "LIKEN-INITRD-ERROR $*"
  # panic=N on the command line turns this into a reboot; without it the machine stops here.
  echo c >/proc/sysrq-trigger
  while :; do sleep 3600; done
}

for m in $(cat /lib/modules/order); do
  insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
done
mount -t efivarfs efivarfs /sys/firmware/efi/efivars 2>/dev/null

arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -n 1; }
root=$(arg root)
label=${root#PARTLABEL=}
[ -n "$label" ] && [ "$label" != "$root" ] || fail "no root=PARTLABEL=<label> on the kernel command line"

# The virtio disk appears once its driver probed it: wait for it, with a deadline.
dev=""
tries=0
while [ -z "$dev" ]; do
  for u in /sys/class/block/*/uevent; do
    if grep -qx "PARTNAME=$label" "$u"; then dev=$(sed -n 's/^DEVNAME=//p' "$u"); fi
  done
  [ -n "$dev" ] && break
  tries=$((tries + 1))
  [ "$tries" -lt 300 ] || fail "no partition labelled $label after 30 s"
  usleep 100000
done

mkdir -p /newroot
mount -t ext4 -o rw "/dev/$dev" /newroot || fail "cannot mount /dev/$dev ($label)"

slot=$(arg liken.slot)
version=$(sed -n 's/^VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /newroot/etc/os-release)
# A trial: GRUB's trial entry adds liken.trial=1; systemd-boot sets LoaderBootCountPath when it
# boots an entry that counts its tries.
trial=0
[ "$(arg liken.trial)" = 1 ] && trial=1
ls /sys/firmware/efi/efivars/LoaderBootCountPath-* >/dev/null 2>&1 && trial=1
echo "LIKEN-BOOT slot=$slot version=$version trial=$trial"

mount --move /dev /newroot/dev
mount --move /sys /newroot/sys
mount --move /proc /newroot/proc
exec switch_root /newroot /sbin/init
