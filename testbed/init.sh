#!/bin/busybox sh
# The testbed slot's /init (busybox-static). It stands in for the OS and its agent: it reports
# which slot and release booted on the serial console, and on a trial boot it feeds the
# i6300esb watchdog only until the trial is confirmed or its deadline passes, so a trial that
# never confirms is reset by the watchdog and GRUB falls back by itself.
# Placeholders filled by testbed/build.ts: @FAULT@ (none|panic|hang), @DEADLINE@ (seconds),
# @HEARTBEAT@ (i6300esb stage seconds).
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/ttyS0 >/dev/ttyS0 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mkdir -p /tmp
slot=$(sed -n 's/.*liken\.slot=\([ab]\).*/\1/p' /proc/cmdline)
trial=0
grep -q 'liken\.trial=1' /proc/cmdline && trial=1
version=$(cat /etc/liken-release)
echo "LIKEN-BOOT slot=$slot version=$version trial=$trial"

if [ "$trial" = 1 ]; then
  insmod /lib/modules/watchdog.ko
  insmod /lib/modules/i6300esb.ko heartbeat=@HEARTBEAT@
  [ -c /dev/watchdog ] || echo "LIKEN-ERROR no /dev/watchdog: the trial would have no watchdog"
  case "@FAULT@" in
    panic)
      echo "LIKEN-FAULT panic"
      echo c >/proc/sysrq-trigger
      ;;
    hang)
      # Opens the watchdog (which starts it) and never feeds it.
      echo "LIKEN-FAULT hang"
      exec 3>/dev/watchdog
      while :; do sleep 3600; done
      ;;
  esac
  watchdog -F -T @HEARTBEAT@ -t 1 /dev/watchdog &
  wdpid=$!
  (
    sleep @DEADLINE@
    if [ ! -e /tmp/confirmed ]; then
      echo "LIKEN-DEADLINE no confirmation after @DEADLINE@ s: the watchdog will reset"
      kill -9 "$wdpid"
    fi
  ) &
fi
echo "LIKEN-UP slot=$slot version=$version trial=$trial"

while read -r cmd; do
  case "$cmd" in
    confirmed)
      touch /tmp/confirmed
      # SIGTERM: busybox watchdog writes the magic close 'V' and stops the timer.
      [ -n "$wdpid" ] && kill "$wdpid"
      echo "LIKEN-CONFIRMED slot=$slot"
      ;;
    reboot)
      echo "LIKEN-REBOOT slot=$slot"
      reboot -f
      ;;
  esac
done
while :; do sleep 3600; done
