#!/bin/bash
# cxlpod-launch across "machines" on loopback (launch-xmach.c,
# docs/multi-machine.md), on stand-in QEMUs that boot nothing
# (fake-qemu.sh beside this script), one launcher per "machine" on this
# one, each in its own work directory; the pod network needs vde2
# (scripts/deps.sh), the test is skipped (exit 77) without it.  What the
# review of 078bfd8 found and int-35 cannot provoke cheaply:
#   - the script --machine sends removes the pod's secrets it wrote once
#     that machine's launcher ended, here one that fails at once;
#
#   launch-xmach.sh CXLPOD-LAUNCH
set -u
L=${1:?usage: $0 cxlpod-launch}
HERE=$(cd "$(dirname "$0")" && pwd)
FAKE=$HERE/fake-qemu.sh
POOLTOOL=$(dirname "$L")/cxlpod-pool
command -v vde_switch >/dev/null && command -v vde_plug >/dev/null \
    || { echo "no vde_switch/vde_plug (vde2): skipped"; exit 77; }
W=$(mktemp -d /tmp/cxlpod-launch-xmach-XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# the launchers' own directories (and the --machine script's) under $W
export TMPDIR=$W FAKE_BOOT_S=1 FAKE_JOB_S=1 FAKE_LINES=2
fails=0
ok()  { printf 'ok   %s\n' "$*"; }
bad() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
show() { local f; for f in "$@"; do echo "--- $f"; tail -n 15 "$f"; done; }
touch "$W/kernel" "$W/initrd"
"$POOLTOOL" create --size 256M --coherent-size 64M --max-hosts 2 "$W/pool.img" >/dev/null \
    || { echo "cxlpod-pool create failed"; exit 1; }
C=(-n 2 --qemu "$FAKE" --kernel "$W/kernel" --initrd "$W/initrd" --pool-backend file
   --pool "$W/pool.img" --net)
# a free port of the loopback (the kernel's pick)
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
printf '#!/bin/sh\nshift\nexec "$@"\n' >"$W/fake-ssh"     # ssh NAME CMD... -> CMD...
chmod +x "$W/fake-ssh"

# 1. --machine with --serve: the script writes the pool's key into its
# directory; that machine's launcher fails (the stand-in QEMU takes no
# remote pool); the key must not stay behind
P=$(port); S=$(port)
timeout 60 "$L" -w "$W/a1" "${C[@]}" --machine-name a --net-listen 127.0.0.1:$P \
    --serve 127.0.0.1:$S --machine m1:1 --ssh-command "$W/fake-ssh" -- true \
    >"$W/a1.out" 2>"$W/a1.err"
rc=$?
d=$(sed -n 's|.*logs in \(.*/cxlpod-machine\.[^/]*\)/w$|\1|p' "$W/a1/machine-m1.err" | head -n 1)
[ -z "$d" ] && d=$(ls -d "$W"/cxlpod-machine.* 2>/dev/null | head -n 1)
if [ $rc = 1 ] && [ -n "$d" ] && [ -d "$d/w" ] && grep -q "its launcher exited (status 2) before it joined" "$W/a1.err" \
   && [ ! -e "$d/pool.key" ] && [ -z "$(find "$d" -name '*key*')" ]; then
    ok "--machine: the machine's launcher failed, the pool key the script wrote there is gone, its logs stay"
else
    show "$W/a1.err" "$W/a1/machine-m1.err"; find "$W" -name 'cxlpod-machine.*' -exec find {} \; 
    bad "--machine: exit $rc (expected 1), directory '$d', keys left: $(find "$d" -name '*key*' 2>/dev/null)"
fi
rm -rf "$W"/cxlpod-machine.*

echo "$fails failed"
[ $fails = 0 ]
