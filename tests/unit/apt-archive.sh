#!/usr/bin/env bash
# scripts/apt-archive.sh finds the machine's own Debian archive (URI and
# keyring) in deb822 and one-line apt sources, skipping disabled entries,
# other suites and cxlpod's own file; and cxlpod_sources writes only the
# suites those sources do not already give for that archive (a second
# entry with another Signed-By makes apt fail: "Conflicting values set for
# option Signed-By").
# covers: scripts/apt-archive.sh
set -euo pipefail
. "$(dirname "$0")/../../scripts/apt-archive.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export APT_ETC=$T
fails=0
check() {  # check WHAT EXPECTED
    local got
    got=$(debian_archive || echo none)
    if [ "$got" = "$2" ]; then echo "ok: $1"; else echo "FAIL: $1: got '$got', expected '$2'"; fails=$((fails + 1)); fi
}
reset() { rm -rf "$T"/*; mkdir -p "$T/sources.list.d"; }

reset
check "no sources" none

reset
cat > "$T/sources.list.d/debian.sources" <<'S'
Types: deb
# a comment
URIs: http://mirror.example.org/debian http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/mirror.gpg

Types: deb
URIs: http://security.example.org/debian-security
Suites: bookworm-security
Components: main
S
cat > "$T/sources.list.d/cxlpod.sources" <<'S'
Types: deb
URIs: http://old.example/debian
Suites: bookworm
S
check "deb822 mirror with its keyring (first URI)" "http://mirror.example.org/debian /usr/share/keyrings/mirror.gpg"

reset
cat > "$T/sources.list.d/a.sources" <<'S'
Enabled: no
Types: deb
URIs: http://disabled.example/debian
Suites: bookworm

Types: deb-src
URIs: http://src-only.example/debian
Suites: bookworm
S
cat > "$T/sources.list.d/b.sources" <<'S'
Types: deb deb-src
URIs: http://proxy.local:3142/debian
Suites: bookworm
Components: main
S
check "disabled and deb-src entries skipped; no keyring" "http://proxy.local:3142/debian "

reset
cat > "$T/sources.list" <<'S'
# deb http://commented.example/debian bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb [arch=amd64 signed-by=/etc/apt/keyrings/m.gpg] http://m.example/debian bookworm main contrib
S
check "one-line list with options" "http://m.example/debian /etc/apt/keyrings/m.gpg"

# cxlpod_sources ARCHIVE KEYRING: the entries deps.sh writes, as
# "TYPE SUITE KEYRING" (- for no Signed-By), ';'-separated
written() {
    cxlpod_sources "$@" 2>/dev/null | awk '
        function flush() { if (t != "") out = out sep t " " s " " (k == "" ? "-" : k); if (t != "") sep = ";"; t = s = k = "" }
        /^$/ { flush(); next }
        $1 == "Types:" { t = $2 } $1 == "Suites:" { s = $2 } $1 == "Signed-By:" { k = $2 }
        END { flush(); print out }'
}
check_w() {  # check_w WHAT EXPECTED
    local got
    got=$(written http://m.example/debian /k.gpg)
    if [ "$got" = "$2" ]; then echo "ok: $1"; else echo "FAIL: $1: got '$got', expected '$2'"; fails=$((fails + 1)); fi
}
bookworm() {
    cat > "$T/sources.list.d/debian.sources" <<'S'
Types: deb
URIs: http://m.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
S
}

reset; bookworm
check_w "nothing else: both suites written" "deb bookworm-backports /k.gpg;deb-src trixie /k.gpg"

reset; bookworm
cat > "$T/sources.list.d/backports.sources" <<'S'
Types: deb
URIs: http://m.example/debian/
Suites: bookworm-backports
Components: main contrib
Signed-By: /usr/share/keyrings/other.gpg
S
check_w "bookworm-backports already there with another Signed-By: skipped" "deb-src trixie /k.gpg"

reset
cat > "$T/sources.list.d/debian.sources" <<'S'
Types: deb deb-src
URIs: http://m.example/debian
Suites: bookworm bookworm-updates bookworm-backports
Components: main
S
check_w "bookworm-backports in the bookworm stanza (no Signed-By): skipped" "deb-src trixie /k.gpg"

reset; bookworm
cat > "$T/sources.list" <<'S'
deb-src [signed-by=/etc/apt/keyrings/t.gpg] http://m.example/debian/ trixie main
deb http://m.example/debian bookworm-backports main
S
check_w "one-line deb-src trixie and deb bookworm-backports: nothing written" ""

reset; bookworm
cat > "$T/sources.list.d/trixie.list" <<'S'
deb [arch=amd64 signed-by=/etc/apt/keyrings/t.gpg] http://m.example/debian trixie main
S
check_w "binary-only trixie: deb-src added with that entry's Signed-By" "deb bookworm-backports /k.gpg;deb-src trixie /etc/apt/keyrings/t.gpg"

reset; bookworm
cat > "$T/sources.list.d/trixie.sources" <<'S'
Types: deb
URIs: http://m.example/debian
Suites: trixie
S
check_w "binary-only trixie without Signed-By: deb-src added without one" "deb bookworm-backports /k.gpg;deb-src trixie -"

reset; bookworm
cat > "$T/sources.list.d/other.sources" <<'S'
Types: deb deb-src
URIs: http://other.example/debian
Suites: bookworm-backports trixie
Signed-By: /o.gpg

Enabled: no
Types: deb deb-src
URIs: http://m.example/debian
Suites: bookworm-backports trixie
Signed-By: /o.gpg
S
cat > "$T/sources.list.d/cxlpod.sources" <<'S'
Types: deb deb-src
URIs: http://m.example/debian
Suites: bookworm-backports trixie
Signed-By: /old.gpg
S
check_w "another archive, a disabled entry and cxlpod's own file do not count" "deb bookworm-backports /k.gpg;deb-src trixie /k.gpg"

[ "$fails" = 0 ] || exit 1
