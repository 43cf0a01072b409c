# Sourced by scripts/deps.sh (and tests/unit/apt-archive.sh): find the
# machine's Debian archive.  APT_ETC replaces /etc/apt (for the test).

# The machine's own Debian archive for bookworm: its URI and keyring, from
# /etc/apt/sources.list.d/*.sources (deb822) or the one-line lists, so that a
# mirror or a proxy in front of the archive keeps working.  Prints
# "URI KEYRING" (KEYRING may be empty: apt's default keyrings).
debian_archive() {
    local f
    for f in "${APT_ETC:-/etc/apt}"/sources.list.d/*.sources; do
        [ -f "$f" ] && [ "$(basename "$f")" != cxlpod.sources ] || continue
        awk 'function flush() {
                 if (types ~ /(^| )deb( |$)/ && suites ~ /(^| )bookworm( |$)/ &&
                     enabled != "no" && uri != "") { print uri, key; found = 1; exit }
                 types = suites = uri = key = enabled = "" }
             /^[ \t]*#/ { next }
             /^[ \t]*$/ { flush(); next }
             { k = tolower($1); sub(/:$/, "", k); $1 = ""; sub(/^ +/, "")
               if (k == "types") types = $0
               else if (k == "suites") suites = $0
               else if (k == "uris") { split($0, u, " "); uri = u[1] }
               else if (k == "signed-by") key = $0
               else if (k == "enabled") enabled = tolower($0) }
             END { if (!found) flush() }' "$f" | head -n1 | grep . && return 0
    done
    for f in "${APT_ETC:-/etc/apt}"/sources.list "${APT_ETC:-/etc/apt}"/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1 == "deb" {
                 key = ""; i = 2
                 if ($2 ~ /^\[/) {
                     for (; i <= NF; i++) {
                         if ($i ~ /^\[?signed-by=/) { key = $i; sub(/^\[?signed-by=/, "", key); sub(/\]$/, "", key) }
                         if ($i ~ /\]$/) { i++; break }
                     }
                 }
                 if ($(i + 1) == "bookworm") { print $i, key; exit }
             }' "$f" | head -n1 | grep . && return 0
    done
    return 1
}
