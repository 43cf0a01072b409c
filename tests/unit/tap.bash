# TAP helpers of the unit and qtest shell scripts (sourced; not a test):
# ok NAME, bad NAME [DETAIL], expect NAME RC PATTERN CMD...; n and fails
# count them.
fails=0; n=0
ok()   { n=$((n + 1)); echo "ok $n - $1"; }
bad()  { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; [ -z "${2:-}" ] || sed 's/^/# /' <<<"$2"; }
# expect NAME RC PATTERN CMD...: CMD exits RC and its output matches PATTERN
expect() {
    local name=$1 want=$2 pat=$3 out rc; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" != "$want" ]; then bad "$name" "exit $rc, wanted $want: $out"
    elif [ -n "$pat" ] && ! grep -qE -- "$pat" <<<"$out"; then bad "$name" "no /$pat/ in: $out"
    else ok "$name"; fi
}
