#!/usr/bin/env bash
# `meson install`'s step for what meson does not build (meson.build calls
# it): the patched QEMU and the guest image that scripts/build-all.sh made
# in BUILD.
#
#   install-parts.sh BUILD LIBEXECDIR GUESTDIR [strip|no-strip]
#                                          (run by meson install)
#
# Installs, under $MESON_INSTALL_DESTDIR_PREFIX (folders relative to the
# prefix unless absolute):
#   LIBEXECDIR/cxlpod/qemu-system-x86_64     BUILD/qemu's (never on PATH),
#                                            without its debug information
#                                            unless no-strip (option strip_qemu)
#   GUESTDIR/guest/initramfs.cpio            BUILD/guest/initramfs.cpio
#   GUESTDIR/guest/kernel-R/boot/vmlinuz-R   the guest kernel, and the
#                        .../vmlinux-R       ELF kernel beside it (PVH boot)
#   GUESTDIR/guest/kernel-R/lib/modules/R/   the modules the image carries
# (the static guest tools, GUESTDIR/guest/bin, are meson's own targets).
set -euo pipefail
B=${1:?usage: install-parts.sh BUILD LIBEXECDIR GUESTDIR}
LIBEXEC=${2:?} GUESTDIR=${3:?} STRIP=${4:-strip}
D=${MESON_INSTALL_DESTDIR_PREFIX:?install-parts.sh is run by meson install}
die() { printf 'install-parts: error: %s\n' "$*" >&2; exit 1; }
# a configured folder under the (destdir) prefix
dest() { case $1 in /*) printf '%s%s' "${DESTDIR:-}" "$1" ;; *) printf '%s/%s' "$D" "$1" ;; esac; }

qemu=$B/qemu/qemu-system-x86_64
initrd=$B/guest/initramfs.cpio
[ -x "$qemu" ] || die "no QEMU at $qemu: build it first (bash scripts/build-all.sh), or configure with -Dcxlpod_build=DIR / -Dinstall_parts=false"
[ -f "$initrd" ] || die "no guest image at $initrd: build it first (bash scripts/build-all.sh)"
vmlinuz=$(readlink -f "$B/guest/vmlinuz" 2>/dev/null || true)
[ -f "$vmlinuz" ] || die "no guest kernel at $B/guest/vmlinuz: build it first (bash scripts/build-guest.sh)"
rel=${vmlinuz##*/vmlinuz-}
kdir=$(dirname "$(dirname "$vmlinuz")")     # BUILD/guest/kernel-R

L=$(dest "$LIBEXEC")/cxlpod
G=$(dest "$GUESTDIR")/guest
K=$G/kernel-$rel
install -d "$L" "$G" "$K/boot"
# the debug information is most of the binary's size
if [ "$STRIP" = strip ]; then
    objcopy --strip-debug "$qemu" "$L/qemu-system-x86_64.tmp"
else
    cp "$qemu" "$L/qemu-system-x86_64.tmp"
fi
chmod 0755 "$L/qemu-system-x86_64.tmp"
mv -f "$L/qemu-system-x86_64.tmp" "$L/qemu-system-x86_64"
install -m 0644 "$initrd" "$G/initramfs.cpio"
install -m 0644 "$vmlinuz" "$K/boot/vmlinuz-$rel"
if [ -f "$kdir/boot/vmlinux-$rel" ]; then
    install -m 0644 "$kdir/boot/vmlinux-$rel" "$K/boot/vmlinux-$rel"
fi
# the modules as the image has them (decompressed, unsigned, with the
# cache module), taken from the image itself
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
(cd "$t" && cpio -i --quiet -d -m 'lib/modules/*' <"$initrd") || die "cannot read the modules of $initrd"
[ -d "$t/lib/modules/$rel" ] || die "$initrd has no lib/modules/$rel (built for another kernel?)"
rm -rf "$K/lib/modules/$rel"
install -d "$K/lib/modules"
cp -R --no-preserve=ownership "$t/lib/modules/$rel" "$K/lib/modules/$rel"
find "$K/lib/modules/$rel" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
echo "install-parts: QEMU to $L, guest kernel $rel and image to $G"
