#!/usr/bin/env bash
# A pod of 4 host-userland guests (--userland host): this machine's root
# file system read-only in every guest, the launch directory read-write at
# its own path, the pod network with names host0..host3 and no route off
# it, ssh between guests with the pod's keys, and programs built on the
# host running unchanged:
#   - a C program built here against the shared libcxlpod (pkg-config),
#     dynamically linked, maps the pool and writes a token in the coherent
#     window; every guest sees every other guest's token;
#   - a Python one-liner maps /dev/dax0.0 and reads the same tokens;
#   - each guest logs into the next one by name, whose CXLPOD_HOST_ID and
#     hostname come back;
#   - a connect to an address off the segment fails at once (no route),
#     and the routing table has only the segment;
#   - files written by a guest appear here; a missing program is rc=127
#     with the launcher's hint.
. "$(dirname "$0")/lib.sh"

N=4
PROJ=$WORK/proj
mkdir -p "$PROJ"
MB=$CXLPOD_TOP/build/meson
command -v cc >/dev/null || fail "no C compiler on the host"
PKG_CONFIG_PATH=$MB/meson-uninstalled pkg-config --exists cxlpod \
    || fail "pkg-config finds no cxlpod in $MB/meson-uninstalled"

# a user's program, built on the host the usual way
cat >"$PROJ/tokens.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libcxlpod.h>
/* tokens TOKEN N: write TOKEN+id at slot id of the coherent window, then
 * wait until slots 0..N-1 all hold TOKEN+slot */
int main(int argc, char **argv)
{
	cxlpod *p;
	struct cxlpod_info in;
	void *base;
	size_t len;
	if (argc != 3 || cxlpod_open(&p, NULL) || cxlpod_get_info(p, &in) ||
	    cxlpod_area(p, CXLPOD_AREA_COHERENT, &base, &len)) {
		fprintf(stderr, "tokens: %s\n", cxlpod_errmsg());
		return 2;
	}
	unsigned long long tok = strtoull(argv[1], NULL, 16);
	int n = atoi(argv[2]);
	volatile unsigned long long *slot = (volatile unsigned long long *)base + 512;
	slot[in.host_id * 8] = tok + in.host_id;
	for (int tries = 0; tries < 6000; tries++) {
		int seen = 0;
		for (int i = 0; i < n; i++)
			seen += slot[i * 8] == tok + i;
		if (seen == n) {
			printf("tokens: host %u saw all %d tokens\n", in.host_id, n);
			return 0;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
	}
	printf("tokens: host %u timed out\n", in.host_id);
	return 1;
}
EOF
cc -O2 -o "$PROJ/tokens" "$PROJ/tokens.c" \
    $(PKG_CONFIG_PATH=$MB/meson-uninstalled pkg-config --cflags --libs cxlpod) \
    -Wl,-rpath,"$MB/guest-tools" || fail "building tokens.c against libcxlpod.so"
file -L "$PROJ/tokens" | grep -q 'dynamically linked' || fail "tokens is not dynamically linked"

TOK=$(token | cut -c1-12)
# a file of this machine's /tmp outside the launch directory (a project
# or its build under /tmp): the guests see it, and their own writes there
# stay in the guest
echo "tmp file $TOK" >"$WORK/hostfile"
cat >"$PROJ/job.sh" <<EOF
me=\$CXLPOD_HOST_ID
next=host\$(( (me + 1) % $N ))
echo "pwd=\$(pwd)"
echo "hostname=\$(hostname)"
for i in \$(seq 0 $((N - 1))); do echo "resolve host\$i=\$(getent hosts host\$i | awk '{print \$1}')"; done
echo "routes=\$(ip -4 route show | tr '\n' ';')"
if timeout 10 bash -c 'exec 3<>/dev/tcp/198.51.100.1/80' 2>/tmp/conn.err; then
    echo "offsegment=CONNECTED"
else
    echo "offsegment=refused: \$(cat /tmp/conn.err)"
fi
echo "hosttmp=[\$(cat $WORK/hostfile 2>&1)]"
echo "guest \$me" >$WORK/guestwrite-\$me 2>/dev/null; echo "guestwrite=\$(cat $WORK/guestwrite-\$me 2>&1)"
echo "ldd-libcxlpod=\$(ldd ./tokens | grep -c libcxlpod.so)"
./tokens $TOK $N
python3 -c "
import mmap, os
fd = os.open(os.environ['CXLPOD_DAX'], os.O_RDWR)
m = mmap.mmap(fd, 2 << 20, mmap.MAP_SHARED)
base = 4096
vals = [int.from_bytes(m[base + 64 * i: base + 64 * i + 8], 'little') for i in range($N)]
print('python tokens ok' if vals == [0x$TOK + i for i in range($N)] else 'python tokens WRONG %r' % vals)
"
# ssh to the next host by name (its sshd may still be starting)
for t in \$(seq 1 60); do
    r=\$(ssh \$next 'echo "\$CXLPOD_HOST_ID \$(hostname) \$CXLPOD_DAX"' 2>/tmp/ssh.err) && break
    sleep 1
done
echo "ssh \$next -> \$r"
[ -n "\$r" ] || echo "ssh error: \$(cat /tmp/ssh.err)"
# the first ssh left a shared connection; a fresh one (-S none) uses the
# P-256 key exchange and host key
echo "mux=\$(ssh -O check \$next 2>&1)"
echo "kex=\$(ssh -S none -v \$next true 2>&1 | sed -n 's/.*kex: algorithm: //p; s/.*Server host key: \([^ ]*\) .*/hostkey \1/p' | tr '\n' ' ')"
# an ssh command gets the pod's environment, not ~/.bashrc (this guest's
# layer of it: the write stays in the guest)
echo 'export CXLPOD_BASHRC_READ=yes' >>/root/.bashrc
echo "bashrc=\$(ssh host\$me 'echo \${CXLPOD_BASHRC_READ:-no} \$SHLVL \$CXLPOD_HOST_ID')"
ls /root/.ssh | tr '\n' ' ' | sed 's/^/rootssh=/'; echo
# this machine's secrets are not the guests'
echo "hostkey=[\$(cat /etc/ssh/ssh_host_*_key 2>/dev/null | head -c 40)]"
echo "roothash=\$(grep '^root:' /etc/shadow | cut -d: -f2)"
echo "written by host\$me" >from-host\$me
# nobody powers off while a peer may still log into it
touch done-\$me
for t in \$(seq 1 600); do [ \$(ls done-* | wc -l) -ge $N ] && break; sleep 0.5; done
EOF

cd "$PROJ"
pod -n $N "${SHM[@]}" --userland host --timeout 600 --json --job "$PROJ/job.sh" \
    >"$WORK/run.out" 2>"$WORK/run.err" || { cat "$WORK/run.err" "$WORK/run.out"; fail "host-userland pod failed"; }
cat "$WORK/run.err"     # the launcher's progress: boot and job times

for ((h = 0; h < N; h++)); do
    next=$(( (h + 1) % N ))
    expect_line $h "^pwd=$PROJ\$"
    expect_line $h "^hostname=host$h\$"
    for ((i = 0; i < N; i++)); do expect_line $h "^resolve host$i=10\.211\.0\.$((i + 1))\$"; done
    # only the segment: no default route, nothing else
    expect_line $h "^routes=10\.211\.0\.0/16 dev [a-z0-9]+ proto kernel scope link src 10\.211\.0\.$((h + 1)) ?;$"
    expect_line $h '^offsegment=refused: .*(unreachable|Unreachable)'
    expect_line $h "^hosttmp=\\[tmp file $TOK\\]\$"
    expect_line $h "^guestwrite=guest $h\$"
    [ ! -e "$WORK/guestwrite-$h" ] || fail "host$h's write to /tmp reached this machine's /tmp"
    expect_line $h '^ldd-libcxlpod=1$'
    expect_line $h "^tokens: host $h saw all $N tokens\$"
    expect_line $h '^python tokens ok$'
    expect_line $h "^ssh host$next -> $next host$next /dev/dax0\.0\$"
    expect_line $h '^mux=Master running'
    expect_line $h '^kex=ecdh-sha2-nistp256 hostkey ecdsa-sha2-nistp256 $'
    expect_line $h "^bashrc=no 2 $h\$"
    expect_line $h '^rootssh=config id_ecdsa id_ecdsa.pub id_ed25519 id_ed25519.pub $'
    if [ "$(id -u)" = 0 ]; then
        expect_line $h '^hostkey=\[\]$'
        expect_line $h '^roothash=\*$'
    fi
    [ "$(cat "$PROJ/from-host$h")" = "written by host$h" ] || fail "host$h's file did not reach $PROJ"
done
jq -e '[.results[] | select(.status == "ok")] | length == 4' < <(grep '^{' "$WORK/run.out" | tail -n1) >/dev/null \
    || fail "not every host ok in the --json line"
# the pod's up: every host's QEMU start to UP, at or after every region ready
jq -e '(.all_up_s | type) == "number" and .all_up_s >= .all_ready_s
       and .all_up_s >= ([.results[].up_s] | max)' < <(grep '^{' "$WORK/run.out" | tail -n1) >/dev/null \
    || fail "all_up_s of the --json line is not the pod's time to every host up: $(grep '^{' "$WORK/run.out" | tail -n1 | jq -c '{all_ready_s, all_up_s, up_s: [.results[].up_s]}')"
pass "4 host-userland guests: names, routes, isolation, a host-built dynamic program, python, ssh between guests"

# a program missing in the guests: rc=127 and the launcher says why
pod -n 1 "${SHM[@]}" --userland host --timeout 300 -- 'no-such-program-cxlpod' \
    >"$WORK/run2.out" 2>"$WORK/run2.err" && fail "a missing program did not fail the job"
grep -q 'host 0: rc=127: a command of the job was not found in the guest (a host-userland guest runs this machine' "$WORK/run2.err" \
    || { cat "$WORK/run2.err"; fail "no hint for rc=127"; }
pass "a missing program: rc=127 with the launcher's hint"

# the pod network for initramfs guests (--net): busybox's nc by name
rm -rf "$WORK/pod"
printf '%s\n' 'for t in $(seq 1 200); do echo "hello from $(hostname)" | nc -w 2 host1 5000 && exit 0; sleep 0.3; done; exit 1' >"$WORK/nc0.sh"
printf '%s\n' 'echo "got: $(nc -l -p 5000)"; echo "routes=$(ip -4 route | tr "\n" ";")"' >"$WORK/nc1.sh"
"$CXLPOD_LAUNCH" -q -w "$WORK/pod" -n 2 "${SHM[@]}" --net --timeout 300 \
    --job-host 0:"$WORK/nc0.sh" --job-host 1:"$WORK/nc1.sh" \
    >"$WORK/run3.out" 2>&1 || { cat "$WORK/run3.out"; fail "the initramfs pod with --net failed"; }
grep -q '^\[host1\] got: hello from host0$' "$WORK/run3.out" || { cat "$WORK/run3.out"; fail "host1 did not get host0's message over the pod network"; }
grep -qE '^\[host1\] routes=10\.211\.0\.0/16 dev [a-z0-9]+ [^;]*;$' "$WORK/run3.out" \
    || { grep routes= "$WORK/run3.out"; fail "an initramfs guest has more than the segment's route"; }
pass "initramfs guests with --net: host0 -> host1 by name over the pod network"
