#!/usr/bin/env bash
# scripts/experiment.sh (docs/experiment.md), without its pods of guests
# under -icount (--quick alone takes minutes):
#   - --quick --dry-run: the arguments, the tools, the guest image (the
#     check that looked for build/guest/initramfs.cpio.gz, which the guest
#     build no longer writes, failed on every fresh clone) and the options
#     of both pods, checked by the launcher's own --dry-run;
#   - --report on the JSON lines of the experiment's tool, cxlpod-allreduce-exp,
#     run as four processes on a loopback file: the aggregation, the table
#     and the plot of a real (tiny) run;
#   - bad arguments refused.
# covers: scripts/experiment.sh
. "$(dirname "$0")/lib.sh"
X=$TOP/scripts/experiment.sh

expect "experiment.sh --quick --dry-run" 0 'dry run: .* nothing booted' bash "$X" --quick --dry-run
expect "experiment.sh --dry-run (the full sweep)" 0 'pod sweep-114688: 4 QEMU command lines' \
    bash "$X" --dry-run --no-plot
expect "experiment.sh --dry-run --filters all" 0 'pod sweep-57344: 4 QEMU' bash "$X" --dry-run --filters all
expect "experiment.sh --filters 1000 is refused" 1 'not a multiple of 8192' bash "$X" --dry-run --filters 1000
expect "experiment.sh --frob is refused" 1 'unknown argument: --frob' bash "$X" --frob
expect "experiment.sh --help" 0 '--quick +pod A with 4 hosts' bash "$X" --help
# a guest image without the tool is refused before anything boots
mkdir -p "$WORK/img" && (cd "$WORK/img" && mkdir bin && echo x >bin/sh &&
    find . | cpio -o -H newc --quiet >"$WORK/noexp.cpio")
expect "experiment.sh: an image without cxlpod-allreduce-exp is refused" 1 \
    'has no cxlpod-allreduce-exp' env CXLPOD_INITRD="$WORK/noexp.cpio" bash "$X" --quick --dry-run

# --report: podA (both areas, N 2,4, 64K,256K) and one sweep pod (N 2,4,
# 256K,1M), as --quick runs them, from the tool on a loopback file
G=$BUILD/meson/guest-tools
R=$WORK/exp
pod() {  # pod NAME FILTER AREAS LIST SIZES
    local d=$R/run1/$1 h pids=()
    mkdir -p "$d"
    for h in 0 1 2 3; do
        CXLPOD_LOOPBACK="$WORK/pool-$1:16M:48M" CXLPOD_HOST_ID=$h CXLPOD_NHOSTS=4 timeout 120 \
            "$G/cxlpod-allreduce-exp" --areas "$3" --hosts-list "$4" --sizes "$5" --no-slices --json \
            >"$d/host$h.out" 2>&1 &
        pids+=($!)
    done
    for h in 0 1 2 3; do
        wait "${pids[$h]}" || { cat "$d/host$h.out"; fail "cxlpod-allreduce-exp host $h of pod $1 failed"; }
        grep -F '{"tool":"cxlpod-allreduce-exp"' "$d/host$h.out" |
            jq -c --argjson f "$2" --arg pod "$1" '. + {pod: $pod, filter: $f}'
    done >"$d/lines.jsonl"
}
pod podA 32768 coherent,noncoherent 2,4 64K,256K
pod sweep-8192 8192 coherent,noncoherent 2,4 256K,1M
cat "$R"/run1/*/lines.jsonl >"$R/run1/lines.jsonl"
echo 1 >"$R/seconds"
expect "experiment.sh --report" 0 'results: .*results.json' bash "$X" --report "$R"
rows=$(jq '[.rows[] | select(.warmup | not)] | length' "$R/results.json")
[ "$rows" = 16 ] && ok "16 measured rows (podA 2 areas x 2 N x 2 sizes, the sweep pod the same)" \
    || bad "$rows measured rows in results.json, expected 16"
[ "$(jq '[.rows[] | .wrong_elements] | add' "$R/results.json")" = 0 ] && ok "exact sums in every row" \
    || bad "wrong elements in the rows"
grep -qE '^\| podA \| noncoherent \| - \| 4 \| 256K \|' "$R/table.md" && ok "table.md has podA's rows" \
    || { bad "table.md"; cat "$R/table.md"; }
[ "$(head -c 4 "$R/experiment.png" | od -An -c | tr -d ' ')" = '211PNG' ] && ok "experiment.png is a PNG" \
    || bad "no PNG plot"
finish
