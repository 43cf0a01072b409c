#!/usr/bin/env bash
# wbinvd, wbnoinvd and invd on the non-coherent area (issue 7 item 4), on 2
# hosts: host 0 stores a pattern WITHOUT any writeback and runs the
# instruction (cxlpod_cache module, /proc/cxlpod-cache), then publishes in
# the coherent window; host 1 invalidates and reads.
#   wbinvd    host 1 sees the new pattern; host 0 re-reads it
#   wbnoinvd  the same
#   invd      the dirty lines are dropped: host 0 re-reads the pool's old
#             content, host 1 sees the old content
. "$(dirname "$0")/lib.sh"

# The instructions need the guest module; an image built without it is a
# failure of the image build step, not a skipped test.
# build-guest.sh records it in the image's inputs: "kmod <sha256>" or
# "kmod none: <reason>".
inputs=${CXLPOD_INITRD:-$CXLPOD_TOP/build/guest/initramfs.cpio}.inputs
if km=$(grep '^kmod none' "$inputs" 2>/dev/null); then
    fail "build step: the guest image has no cxlpod_cache module (${km#kmod none: }); see build/logs/guest-kmod.log or guest-headers-download.log"
fi

rc=0
pod -n 2 "${SHM[@]}" --timeout 400 -- 'cxlpod-wbinvd --json' >"$WORK/launch.out" 2>&1 || rc=$?
if out 0 | grep -q 'cxlpod_cache kernel module is not loaded'; then
    out 0 | grep 'cxlpod-wbinvd:' >&2
    fail "build step: the guest image has no usable cxlpod_cache module (see above)"
fi
wrong=()
for h in 0 1; do
    j=$(json_of $h cxlpod-wbinvd)
    [ -n "$j" ] || { cat "$WORK/launch.out"; out $h; fail "host$h printed no cxlpod-wbinvd result"; }
    n=$(jq '.results | length' <<<"$j")
    [ "$n" = 3 ] || { out $h; fail "host$h: $n results, expected 3"; }
    while read -r op check expect new old other ok; do
        echo "host$h $op $check: $new new, $old old, $other other (expected all $expect)"
        [ "$ok" = true ] || wrong+=("host$h $op $check: $new new/$old old/$other other, expected all $expect")
    done < <(jq -r '.results[] | "\(.op) \(.check) \(.expect) \(.new) \(.old) \(.other) \(.ok)"' <<<"$j")
done
[ ${#wrong[@]} = 0 ] || fail "$(printf '%s; ' "${wrong[@]}")"
# every check right, and the pod ended well: both jobs exited 0
[ "$rc" = 0 ] || { cat "$WORK/launch.out"; fail "the launcher exited $rc (a job or a QEMU failed)"; }
pass "wbinvd and wbnoinvd wrote back host 0's unflushed lines, invd dropped them"
