#!/usr/bin/env bash
# cxlpod installed like a tool (docs/building.md, "Installing"):
#   - scripts/install.sh puts the launcher and the pool tool in bin/, the
#     patched QEMU in libexec/cxlpod/ (nothing named qemu* on PATH), the
#     guest kernel, modules, initramfs and static guest tools in
#     share/cxlpod/guest/, libcxlpod (static, shared, header, pkg-config),
#     the Python module and man pages made of the tools' --help;
#   - the tree is moved elsewhere and a 2-host pod boots from it with no
#     checkout in sight (no CXLPOD_TOP/QEMU/KERNEL/INITRD): its QEMU,
#     kernel and initramfs are the installation's; a launcher copied out
#     of the tree says it cannot find them;
#   - a program built with pkg-config against the installed libcxlpod runs
#     without LD_LIBRARY_PATH, linked shared or static;
#   - an install into a prefix its user cannot write fails before doing
#     anything; one that runs out of space midway removes what it copied;
#     --uninstall removes everything.
# With CXLPOD_INSTALLED=PREFIX (scripts/test.sh --installed PREFIX) that
# installation is checked instead of a fresh one (not moved, not removed).
# covers: scripts/install.sh
. "$(dirname "$0")/lib.sh"

INSTALL=$CXLPOD_TOP/scripts/install.sh
if [ -n "${CXLPOD_INSTALLED:-}" ]; then
    P=$CXLPOD_INSTALLED
else
    t0=$(date +%s%N)
    bash "$INSTALL" --no-build "$WORK/stage-prefix" >"$WORK/install.log" 2>&1 \
        || { cat "$WORK/install.log"; fail "scripts/install.sh --no-build failed"; }
    echo "install: $(( ($(date +%s%N) - t0) / 1000000 )) ms, $(du -sh "$WORK/stage-prefix" | cut -f1)"
    # nothing in the tree may depend on where it was installed
    mv "$WORK/stage-prefix" "$WORK/moved"
    P=$WORK/moved
fi

# 1. the layout
lib=$(cd "$P" && ls -d lib/*/libcxlpod.so.0 | head -n1)
libdir=$P/$(dirname "$lib")
for f in bin/cxlpod-launch bin/cxlpod-pool libexec/cxlpod/qemu-system-x86_64 \
         share/cxlpod/guest/initramfs.cpio share/cxlpod/guest/bin/cxlpod-info \
         include/libcxlpod.h share/man/man1/cxlpod-launch.1 share/man/man1/cxlpod-pool.1 \
         lib/python3/dist-packages/cxlpod/__init__.py lib/python3/dist-packages/cxlpod/_config.py; do
    [ -e "$P/$f" ] || fail "the installation has no $f"
done
for f in libcxlpod.a libcxlpod.so pkgconfig/cxlpod.pc; do
    [ -e "$libdir/$f" ] || fail "the installation has no $libdir/$f"
done
ls "$P/bin" | grep -q qemu && fail "a QEMU is on PATH: $(ls "$P/bin")"
k=$(ls "$P"/share/cxlpod/guest/kernel-*/boot/vmlinuz-* 2>/dev/null | head -n1)
[ -n "$k" ] || fail "no guest kernel in share/cxlpod/guest/kernel-*/boot"
rel=${k##*/vmlinuz-}
[ -n "$(find "$P/share/cxlpod/guest/kernel-$rel/lib/modules/$rel" -name 'cxl_pci.ko*')" ] \
    || fail "the guest's modules (cxl_pci) are not installed"
file "$P/share/cxlpod/guest/bin/cxlpod-info" | grep -q 'statically linked' \
    || fail "the installed guest tools are not static: $(file "$P/share/cxlpod/guest/bin/cxlpod-info")"
# the man pages are the tools' --help: every launcher option is in its page
grep -q -- '--userland' "$P/share/man/man1/cxlpod-launch.1" || fail "cxlpod-launch.1 lacks --userland"
for sub in create inspect check reset-host wipe upgrade; do
    grep -qi "^\.SH \"CXLPOD-POOL $sub\"" "$P/share/man/man1/cxlpod-pool.1" || fail "cxlpod-pool.1 has no section for $sub"
done
if command -v man >/dev/null; then
    man -l "$P/share/man/man1/cxlpod-launch.1" 2>&1 | grep -q 'boot-timeout' || fail "man -l cannot render cxlpod-launch.1"
fi
pass "layout: bin, libexec/cxlpod, share/cxlpod/guest (kernel $rel), lib, include, python, man"

# 2. a pod from the installed tree alone
clean_env=(env -u CXLPOD_TOP -u CXLPOD_QEMU -u CXLPOD_KERNEL -u CXLPOD_INITRD -u CXLPOD_LAUNCH)
rc=0
(cd / && "${clean_env[@]}" "$P/bin/cxlpod-launch" -n 2 -w "$WORK/pod" --json -q \
    -- 'cxlpod-info --json') >"$WORK/pod.txt" 2>"$WORK/pod.err" || rc=$?
cat "$WORK/pod.txt"
[ "$rc" = 0 ] || { cat "$WORK/pod.err"; fail "the installed launcher's pod failed (exit $rc)"; }
tail -n1 "$WORK/pod.txt" | jq -e '.ok and .hosts == 2 and all(.results[]; .rc == 0)' >/dev/null \
    || fail "the installed launcher's --json line is not ok"
for i in 0 1; do
    cmd=$(cat "$WORK/pod/host$i.cmdline")
    grep -qF -- "$P/libexec/cxlpod/qemu-system-x86_64" <<<"$cmd" || fail "host $i did not run the installed QEMU: $cmd"
    grep -qF -- "-kernel $P/share/cxlpod/guest/kernel-$rel/boot/" <<<"$cmd" || fail "host $i did not boot the installed kernel: $cmd"
    grep -qF -- "-initrd $P/share/cxlpod/guest/initramfs.cpio" <<<"$cmd" || fail "host $i did not boot the installed initramfs: $cmd"
    expect_line $i "\"host_id\":$i"
done
"${clean_env[@]}" "$P/bin/cxlpod-pool" check "$WORK/pod/pool.img" >/dev/null \
    || fail "the installed cxlpod-pool finds problems in the pod's pool"
pass "a 2-host pod booted from the installed tree ($P), its pool checked by the installed pool tool"

# a launcher outside any installation or checkout cannot guess
mkdir -p "$WORK/lone/bin"; cp "$P/bin/cxlpod-launch" "$WORK/lone/bin/"
rc=0; err=$(cd / && "${clean_env[@]}" "$WORK/lone/bin/cxlpod-launch" -n 1 -w "$WORK/lone/pod" -- true 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "neither installed" <<<"$err" \
    || fail "a launcher outside any installation: exit $rc, '$err' (want 2 and 'neither installed')"
pass "a launcher copied out of the installation says so (exit 2)"

# 3. a program against the installed libcxlpod
export PKG_CONFIG_PATH=$libdir/pkgconfig
cat >"$WORK/hello.c" <<'EOF'
#include <stdio.h>
#include <libcxlpod.h>
int main(void)
{
	cxlpod *p;
	struct cxlpod_info in;
	if (cxlpod_open(&p, NULL) || cxlpod_get_info(p, &in)) {
		fprintf(stderr, "%s\n", cxlpod_errmsg());
		return 1;
	}
	printf("%s %llu\n", cxlpod_backend_name(in.backend), (unsigned long long)in.size);
	return cxlpod_close(p);
}
EOF
cc -o "$WORK/hello" "$WORK/hello.c" $(pkg-config --cflags --libs cxlpod) \
    -Wl,-rpath,"$(pkg-config --variable=libdir cxlpod)" || fail "building against the installed libcxlpod.so"
cc -static -o "$WORK/hello-static" "$WORK/hello.c" $(pkg-config --cflags cxlpod) \
    "$(pkg-config --variable=libdir cxlpod)/libcxlpod.a" || fail "building against the installed libcxlpod.a"
so=$(ldd "$WORK/hello" | awk '$1 == "libcxlpod.so.0" { print $3 }')
[ -n "$so" ] && [ "$(readlink -f "$so")" = "$(readlink -f "$libdir/libcxlpod.so.0")" ] \
    || fail "hello does not load the installed libcxlpod: $(ldd "$WORK/hello")"
for h in hello hello-static; do
    got=$(CXLPOD_LOOPBACK=$WORK/lb.$h:1M:8M "$WORK/$h") || fail "$h did not run"
    [ "$got" = "loopback 8388608" ] || fail "$h printed '$got'"
done
pass "pkg-config: a program linked shared (run path) and static against the installation runs"

[ -n "${CXLPOD_INSTALLED:-}" ] && exit 0

# 4. a prefix its user cannot write: refused before anything
mkdir -p "$WORK/ro"; chmod 0755 "$WORK" "$WORK/ro"
rc=0; err=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
    bash "$INSTALL" --no-build "$WORK/ro/prefix" 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "is not writable.*nothing was installed" <<<"$err" \
    || fail "install into a read-only prefix: exit $rc, '$err'"
[ -z "$(ls -A "$WORK/ro")" ] || fail "the refused install left files: $(ls -A "$WORK/ro")"
pass "an install into a prefix that is not writable fails clearly, nothing written"

# 5. out of space midway (a tmpfs of half the installation's size): what
#    was copied is removed again
half=$(( $(du -sk "$P" | cut -f1) / 2 ))
rc=0
err=$(unshare -m --propagation private bash -c '
    mount -t tmpfs -o size=${3}k tmpfs "$1" || exit 99
    bash "$2" --no-build "$1/p"; rc=$?
    echo "left: $(find "$1" -mindepth 1 | wc -l)"; exit $rc' _ "$WORK/ro" "$INSTALL" "$half" 2>&1) || rc=$?
[ "$rc" != 99 ] || fail "cannot mount a tmpfs for the out-of-space install: $err"
[ "$rc" = 1 ] || fail "an install that runs out of space: exit $rc (want 1): $err"
grep -q "removed what this run had copied" <<<"$err" || fail "the install did not fail midway: $err"
grep -q "^left: 0$" <<<"$err" || fail "an install that ran out of space left files behind: $(tail -n 3 <<<"$err")"
pass "an install that runs out of space midway removes what it copied (exit 1)"

# 6. uninstall
bash "$INSTALL" --uninstall "$P" >/dev/null 2>&1 || fail "scripts/install.sh --uninstall failed"
[ -z "$(find "$P" -mindepth 1 2>/dev/null)" ] || fail "--uninstall left: $(find "$P" -mindepth 1 | head)"
pass "--uninstall removes every file and folder it installed"
