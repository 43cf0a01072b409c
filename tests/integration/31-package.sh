#!/usr/bin/env bash
# The Debian package (docs/building.md, "The Debian package"):
#   - scripts/build-deb.sh builds it with dpkg-buildpackage from this tree,
#     reusing the suite's build folder (QEMU and the guest image are not
#     rebuilt), and lintian reports no error;
#   - apt accepts `apt install ./cxlpod_*.deb` with this machine's
#     packages (simulated: a real install would put files into /usr, which
#     other clones on this machine use), and the package's metadata
#     depends on the runtime libraries and recommends vde2, openssh and
#     Open MPI;
#   - unpacked with dpkg -x into a temporary folder (no chroot), its
#     launcher boots a 2-host pod with nothing else (the package's QEMU,
#     kernel and initramfs, from /usr/libexec/cxlpod and /usr/lib/cxlpod
#     under that folder) and its guests run cxlpod-info.
# covers: scripts/build-deb.sh
. "$(dirname "$0")/lib.sh"

t0=$(date +%s)
deb=$(bash "$CXLPOD_TOP/scripts/build-deb.sh" 2>"$WORK/build-deb.err") \
    || { cat "$WORK/build-deb.err"; fail "scripts/build-deb.sh failed"; }
echo "package: $deb, $(du -k "$deb" | cut -f1) KiB, built and checked in $(( $(date +%s) - t0 )) s"
grep -E '^(E|W):' "$(dirname "$deb")/lintian.txt" || true
grep -q '^E:' "$(dirname "$deb")/lintian.txt" && fail "lintian reports errors"

# the metadata
dep=$(dpkg-deb -f "$deb" Depends); rec=$(dpkg-deb -f "$deb" Recommends)
for p in libglib2.0-0 libjson-glib-1.0-0 libvdeplug2 seabios qemu-system-data python3; do
    grep -q "\b$p\b" <<<"$dep" || fail "Depends lacks $p: $dep"
done
for p in vde2 openssh-client openssh-server openmpi-bin; do
    grep -q "\b$p\b" <<<"$rec" || fail "Recommends lacks $p: $rec"
    grep -q "\b$p\b" <<<"$dep" && fail "$p is a Depends (want Recommends): $dep"
done
sim=$(apt-get install -s "$deb" 2>&1) || { echo "$sim"; fail "apt-get install -s $deb fails"; }
grep -q '^Inst cxlpod ' <<<"$sim" || { echo "$sim"; fail "apt would not install cxlpod"; }
pass "the package's dependencies; apt install ./$(basename "$deb") resolves (simulated)"

# its contents, unpacked, and a first pod from them
R=$WORK/root
dpkg -x "$deb" "$R"
for f in usr/bin/cxlpod-launch usr/bin/cxlpod-pool usr/libexec/cxlpod/qemu-system-x86_64 \
         usr/lib/cxlpod/guest/initramfs.cpio usr/include/libcxlpod.h \
         usr/lib/python3/dist-packages/cxlpod/__init__.py usr/share/man/man1/cxlpod-launch.1.gz \
         usr/share/doc/cxlpod/copyright; do
    [ -e "$R/$f" ] || fail "the package has no /$f"
done
ls "$R"/usr/lib/cxlpod/guest/kernel-*/boot/vmlinux-* >/dev/null || fail "the package has no guest kernel ELF"
ls "$R"/usr/lib/x86_64-linux-gnu/libcxlpod.so.0 "$R"/usr/lib/x86_64-linux-gnu/pkgconfig/cxlpod.pc >/dev/null \
    || fail "the package has no libcxlpod.so.0 or cxlpod.pc"
ls "$R/usr/bin" | grep -q qemu && fail "the package puts a QEMU on PATH"
rc=0
(cd / && env -u CXLPOD_TOP -u CXLPOD_QEMU -u CXLPOD_KERNEL -u CXLPOD_INITRD \
    "$R/usr/bin/cxlpod-launch" -n 2 -w "$WORK/pod" --json -q -- 'cxlpod-info --json') \
    >"$WORK/pod.txt" 2>"$WORK/pod.err" || rc=$?
cat "$WORK/pod.txt"
[ "$rc" = 0 ] || { cat "$WORK/pod.err"; fail "the package's launcher: exit $rc"; }
tail -n1 "$WORK/pod.txt" | jq -e '.ok and .hosts == 2' >/dev/null || fail "the package's pod is not ok"
grep -qF "$R/usr/libexec/cxlpod/qemu-system-x86_64" "$WORK/pod/host0.cmdline" \
    || fail "the pod did not run the package's QEMU: $(cat "$WORK/pod/host0.cmdline")"
grep -qF -- "-initrd $R/usr/lib/cxlpod/guest/initramfs.cpio" "$WORK/pod/host0.cmdline" \
    || fail "the pod did not boot the package's initramfs"
for i in 0 1; do expect_line $i "\"host_id\":$i"; done
pass "the package's launcher (unpacked with dpkg -x) boots a 2-host pod from the package's files"
