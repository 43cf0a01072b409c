#!/usr/bin/env bash
# The benchmark scripts of docs/benchmarks.md, without their guests (each
# takes minutes to hours): bench.sh, bench-scale.sh, bench-pod.sh,
# bench-timed.sh, bench-contend.sh and bench-remote.sh with --dry-run check their arguments, the tools they need
# and the launcher options of every guest or pod they would boot (the
# launcher's own --dry-run builds each QEMU command line); bad arguments
# are refused.  Nothing is built and nothing boots.
# covers: scripts/bench.sh scripts/bench-scale.sh scripts/bench-pod.sh scripts/bench-timed.sh scripts/bench-contend.sh scripts/bench-remote.sh
. "$(dirname "$0")/lib.sh"
S=$TOP/scripts
export CXLPOD_BUILD=$BUILD

expect "bench.sh --dry-run" 0 'dry run: .*nothing booted' bash "$S/bench.sh" --dry-run
expect "bench.sh --quick --dry-run: guest timed" 0 "guest timed: .*mode=timed" bash "$S/bench.sh" --quick --dry-run
expect "bench.sh --dry-run --no-probe --latency-ns 200" 0 'dry run' \
    bash "$S/bench.sh" --dry-run --no-probe --latency-ns 200 --workdir "$WORK/bench"
[ -s "$WORK/bench/type3.dry-run" ] && grep -q 'ivshmem-plain' "$WORK/bench/type3.dry-run" \
    && ok "bench.sh: guest B's command line has the ivshmem-plain BAR" || bad "bench.sh: no ivshmem-plain in guest B's command line"
[ ! -e "$WORK/bench/probe.dry-run" ] && ok "bench.sh --no-probe: no guest C" || bad "bench.sh --no-probe ran guest C"
expect "bench.sh --rounds 0 is refused" 1 'positive number' bash "$S/bench.sh" --dry-run --rounds 0
expect "bench.sh --frob is refused" 1 'unknown argument: --frob' bash "$S/bench.sh" --frob
expect "bench.sh --help" 0 'dry-run' bash "$S/bench.sh" --help

expect "bench-scale.sh --dry-run (1..64 hosts, pools to 16G)" 0 'dry run: .*nothing booted' \
    bash "$S/bench-scale.sh" --dry-run --workdir "$WORK/scale"
[ "$(grep -c -- '-device cxl-shm' "$WORK/scale/pod64.dry-run")" = 64 ] && ok "bench-scale.sh: 64 QEMU command lines for pod64" \
    || bad "bench-scale.sh: pod64's command lines"
expect "bench-scale.sh --launcher --dry-run is refused" 1 'boots nothing' \
    bash "$S/bench-scale.sh" --launcher --dry-run
grep -q 'size=16G\|size=17179869184' "$WORK/scale/size16G.dry-run" && ok "bench-scale.sh: the 16G pool" \
    || { bad "bench-scale.sh: the 16G pool is not in its command line"; head -c 600 "$WORK/scale/size16G.dry-run"; }
expect "bench-scale.sh --quick --dry-run" 0 'pod4: 4 host' bash "$S/bench-scale.sh" --quick --dry-run
expect "bench-scale.sh --hosts x is refused" 1 'numbers separated by commas' bash "$S/bench-scale.sh" --dry-run --hosts x

expect "bench-pod.sh --dry-run" 0 'dry run: .*nothing booted' bash "$S/bench-pod.sh" --dry-run
expect "bench-pod.sh --dry-run --hosts 4 --skip boot,net --ipod-arg --boot-parallel=0" 0 'dry run' \
    bash "$S/bench-pod.sh" --dry-run --hosts 4 --skip boot,net --ipod-arg --boot-parallel=0
expect "bench-pod.sh --skip frob is refused" 1 "'frob' is not boot, net, pod, ipod or ssh" bash "$S/bench-pod.sh" --dry-run --skip frob
expect "bench-pod.sh --dry-run --skip boot,net,pod,ipod --ssh-hosts 4,8 --ssh-reps 3" 0 'ssh: 8 host-userland guests, the guests. ssh fast' \
    bash "$S/bench-pod.sh" --dry-run --skip boot,net,pod,ipod --ssh-hosts 4,8 --ssh-reps 3
expect "bench-pod.sh --ssh-hosts 1 is refused" 1 'wants numbers 2..256' bash "$S/bench-pod.sh" --dry-run --ssh-hosts 1
expect "bench-pod.sh --ssh-reps 0 is refused" 1 'wants a positive number' bash "$S/bench-pod.sh" --dry-run --ssh-reps 0
expect "bench-pod.sh --hosts 257 is refused" 1 'wants 1..256' bash "$S/bench-pod.sh" --dry-run --hosts 257

expect "bench-timed.sh --dry-run" 0 'has the timed-bench case' bash "$S/bench-timed.sh" --dry-run
expect "bench-timed.sh --frob is refused" 1 'unknown argument' bash "$S/bench-timed.sh" --frob

expect "bench-contend.sh --dry-run" 0 'dry run: 4 hosts on 256 bytes' bash "$S/bench-contend.sh" --dry-run
expect "bench-contend.sh --hosts 1 is refused" 1 'wants 2..256' bash "$S/bench-contend.sh" --dry-run --hosts 1

expect "bench-remote.sh --dry-run" 0 'dry run: .*nothing booted' \
    bash "$S/bench-remote.sh" --dry-run --workdir "$WORK/remote"
[ "$(grep -c 'pool=ucx://127.0.0.1:' "$WORK/remote/pair/b.dry-run")" = 1 ] &&
    ! grep -q 'pool=ucx' "$WORK/remote/pair/a.dry-run" \
    && ok "bench-remote.sh: the pair's host 1 is remote, host 0 local" || bad "bench-remote.sh: the pair's hosts"
[ "$(grep -c 'pool=ucx://127.0.0.1:' "$WORK/remote/ar/split/b.dry-run")" = 2 ] &&
    [ "$(grep -c 'qemu-system' "$WORK/remote/ar/local4.dry-run")" = 4 ] \
    && ok "bench-remote.sh: the allreduce's 2 remote + 2 local and 4 local hosts" || bad "bench-remote.sh: the allreduce pods"
[ "$(grep -c 'pool=ucx://127.0.0.1:' "$WORK/remote/pod/b.dry-run")" = 8 ] \
    && ok "bench-remote.sh: the 8+8 pod" || bad "bench-remote.sh: the pod's 8 remote hosts"
! grep -h -o 'pool=ucx://[0-9.]*' "$WORK"/remote/*/b.dry-run "$WORK"/remote/ar/split/b.dry-run | grep -qv 'ucx://127\.' \
    && ok "bench-remote.sh: every remote host on the loopback" || bad "bench-remote.sh: a remote host beyond the loopback"
expect "bench-remote.sh --quick --dry-run --skip pair,ar" 0 'pod: done' bash "$S/bench-remote.sh" --quick --dry-run --skip pair,ar
expect "bench-remote.sh --skip frob is refused" 1 "'frob' is not pair, ar or pod" bash "$S/bench-remote.sh" --dry-run --skip frob
expect "bench-remote.sh --pod-hosts 0 is refused" 1 'wants 1..64' bash "$S/bench-remote.sh" --dry-run --pod-hosts 0
expect "bench-remote.sh --frob is refused" 1 'unknown argument: --frob' bash "$S/bench-remote.sh" --frob
finish
