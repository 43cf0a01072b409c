#!/usr/bin/env bash
# The commands of README.md's quick start and "Running your own code on a
# pod", and docs/examples/two-hosts.conf, without booting: scripts/demo.sh
# --dry-run (its three pods' launcher options), and each cxlpod-launch
# command line as README.md writes it, with the launcher's --dry-run (the
# options, the paths and the QEMU command lines it would start).
# covers: scripts/demo.sh
. "$(dirname "$0")/lib.sh"
L=${CXLPOD_LAUNCH:-$BUILD/meson/host-tools/cxlpod-launch}
export CXLPOD_BUILD=$BUILD
# count REGEX FILE: lines of FILE matching REGEX
count() { grep -c -- "$1" "$2" || true; }

expect "demo.sh --dry-run" 0 "the three pods' options are fine" bash "$TOP/scripts/demo.sh" --dry-run
expect "demo.sh --frob is refused" 1 'unknown argument' bash "$TOP/scripts/demo.sh" --frob

mkdir -p "$WORK/my-project"
cd "$WORK/my-project"
printf '#!/bin/sh\necho hi\n' >my-prog && chmod +x my-prog
printf 'mpirun -np 4 --host host0,host1,host2,host3 hostname\n' >run.sh
"$L" --dry-run -w "$WORK/w1" -n 4 --userland host -- ./my-prog >"$WORK/1" 2>&1 \
    && [ "$(count 'virtio-9p-pci' "$WORK/1")" = 4 ] && ok "cxlpod-launch -n 4 --userland host -- ./my-prog" \
    || { bad "cxlpod-launch -n 4 --userland host -- ./my-prog"; cat "$WORK/1"; }
"$L" --dry-run -w "$WORK/w2" -n 4 --userland host --job-host 0:run.sh >"$WORK/2" 2>&1 \
    && [ "$(count 'virtio-9p-pci' "$WORK/2")" = 4 ] && ok "cxlpod-launch -n 4 --userland host --job-host 0:run.sh" \
    || { bad "cxlpod-launch --job-host 0:run.sh"; cat "$WORK/2"; }
cd "$TOP"
"$L" --dry-run -w "$WORK/w3" -n 2 -- 'cxlpod-info; my-tool' >"$WORK/3" 2>&1 \
    && [ "$(count '-device cxl-shm' "$WORK/3")" = 2 ] && ok "cxlpod-launch -n 2 -- 'cxlpod-info; my-tool'" \
    || { bad "cxlpod-launch -n 2 -- COMMAND"; cat "$WORK/3"; }
"$L" --dry-run -w "$WORK/w4" --interactive >"$WORK/4" 2>&1 \
    && [ "$(count '-device cxl-shm' "$WORK/4")" = 2 ] && ok "cxlpod-launch --interactive" \
    || { bad "cxlpod-launch --interactive"; cat "$WORK/4"; }
"$L" --dry-run -w "$WORK/w5" --config docs/examples/two-hosts.conf >"$WORK/5" 2>&1 \
    && [ "$(count '-device cxl-shm' "$WORK/5")" = 2 ] && [ "$(count 'latency-ns=300' "$WORK/5")" = 1 ] \
    && ok "cxlpod-launch --config docs/examples/two-hosts.conf (host 1's latency-ns=300)" \
    || { bad "cxlpod-launch --config docs/examples/two-hosts.conf"; cat "$WORK/5"; }
finish
