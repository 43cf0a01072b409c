#!/usr/bin/env bash
# The example project of docs/ci.md (examples/pod-counter), run exactly as
# that page's CI recipe runs it, with the "restore a cached installation"
# step: cxlpod installed into a prefix (scripts/install.sh), that prefix's
# bin on PATH and its pkg-config folder on PKG_CONFIG_PATH, nothing of the
# checkout in the environment; then the project's own ci/pod-test.sh, which
# builds pod-counter with pkg-config, boots a 4-host pod with --userland
# host, runs it on every host and judges the launcher's --json line.
# With CXLPOD_INSTALLED=PREFIX that installation is used.
. "$(dirname "$0")/lib.sh"

if [ -n "${CXLPOD_INSTALLED:-}" ]; then
    P=$CXLPOD_INSTALLED
else
    P=$WORK/prefix
    bash "$CXLPOD_TOP/scripts/install.sh" --no-build "$P" >"$WORK/install.log" 2>&1 \
        || { cat "$WORK/install.log"; fail "scripts/install.sh --no-build failed"; }
fi
pc=$(ls -d "$P"/lib/*/pkgconfig | head -n1)
# the user's project, as their CI checks it out
cp -r "$CXLPOD_TOP/examples/pod-counter" "$WORK/pod-counter"
rm -f "$WORK/pod-counter/pod-counter"
rc=0
env -u CXLPOD_TOP -u CXLPOD_QEMU -u CXLPOD_KERNEL -u CXLPOD_INITRD -u CXLPOD_LAUNCH \
    PATH="$P/bin:$PATH" PKG_CONFIG_PATH="$pc" CXLPOD_CI_WORKDIR="$WORK/ci" \
    sh "$WORK/pod-counter/ci/pod-test.sh" 4 >"$WORK/ci.out" 2>&1 || rc=$?
cat "$WORK/ci.out"
[ "$rc" = 0 ] || fail "examples/pod-counter/ci/pod-test.sh exited $rc"
grep -q '^pod-test: PASS on 4 hosts' "$WORK/ci.out" || fail "no PASS line from pod-test.sh"
# it really ran on the pod, the installed launcher and QEMU
for i in 0 1 2 3; do
    grep -q "pod-counter: host $i of 4: PASS counter 80000 (want 80000), 4 of 4 records right" \
        "$WORK/ci/pod/host$i.out" || fail "host $i: $(cat "$WORK/ci/pod/host$i.out")"
    grep -qF "$P/libexec/cxlpod/qemu-system-x86_64" "$WORK/ci/pod/host$i.cmdline" \
        || fail "host $i did not run the installed QEMU"
done
pass "examples/pod-counter's CI script passes on a 4-host host-userland pod from the installation"

# and it can fail: a program that exits 1 on one host fails the script
cat >"$WORK/pod-counter/pod-counter.c" <<'EOF2'
#include <stdio.h>
#include <libcxlpod.h>
int main(void)
{
	cxlpod *p;
	struct cxlpod_info in;
	if (cxlpod_open(&p, NULL) || cxlpod_get_info(p, &in))
		return 1;
	printf("pod-counter: host %u of %u: %s\n", in.host_id, in.max_hosts,
	       in.host_id == 1 ? "FAIL on purpose" : "PASS");
	return in.host_id == 1;
}
EOF2
rm -f "$WORK/pod-counter/pod-counter"; rm -rf "$WORK/ci"
rc=0
env -u CXLPOD_TOP -u CXLPOD_QEMU -u CXLPOD_KERNEL -u CXLPOD_INITRD -u CXLPOD_LAUNCH \
    PATH="$P/bin:$PATH" PKG_CONFIG_PATH="$pc" CXLPOD_CI_WORKDIR="$WORK/ci" \
    sh "$WORK/pod-counter/ci/pod-test.sh" 2 >"$WORK/ci2.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q '^pod-test: FAIL' "$WORK/ci2.out" \
    || { cat "$WORK/ci2.out"; fail "pod-test.sh with a failing host: exit $rc (want 1 and a FAIL line)"; }
pass "pod-test.sh fails when one host's test fails (exit 1)"
