#!/usr/bin/env bash
# scripts/apt-archive.sh finds the machine's own Debian archive (URI and
# keyring) in deb822 and one-line apt sources, skipping disabled entries,
# other suites and cxlpod's own file.
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

[ "$fails" = 0 ] || exit 1
