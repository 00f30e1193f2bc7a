#!/bin/busybox sh
# PID 1 of cairn's default guest (crates/cairn-vm/src/guest.rs packs it with
# busybox, the virtio modules in /modules, /cairn/env and /cairn/command).
#
# Loads the modules, brings up the network (qemu's user-mode network: the
# host is 10.0.2.2, its loopback services such as `cairn gateway` are
# reachable there), mounts the disk /dev/vda (ext4) on /mnt, prints `cairn-guest: up`, then runs
# /cairn/command in /mnt with the console as its output, or idles. When
# the command ends the guest says how and powers off.

/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root

say() { echo "cairn-guest: $*"; }
halt() {
    sync
    poweroff -f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
for m in $(cat /modules/order); do
    insmod "/modules/$m.ko" 2>/dev/null
done
n=0
while [ ! -b /dev/vda ]; do
    n=$((n + 1))
    if [ $n -gt 200 ]; then
        say "no disk: /dev/vda did not appear"
        halt
    fi
    sleep 0.05
done
if ! mount -t ext4 /dev/vda /mnt 2>/dev/null; then
    say "the disk /dev/vda does not mount as ext4: /mnt is not on it"
fi
ip link set lo up
if ip link set eth0 up 2>/dev/null; then
    ip addr add 10.0.2.15/24 dev eth0
    ip route add default via 10.0.2.2
fi
. /cairn/env
cd /mnt
stty -echo 2>/dev/null
say "up"
if [ -f /cairn/command ]; then
    sh /cairn/command
    say "the command exited with status $?"
    halt
fi
while :; do sleep 3600; done
