# Sourced by scripts/deps.sh (and tests/unit/apt-archive.sh): find the
# machine's Debian archive.  APT_ETC replaces /etc/apt (for the test).

# awk: the fields of deb822 stanzas; each stanza ends in flush(), which the
# program defines (types, suites, uris, key, enabled are its fields)
DEB822_STANZAS='
             /^[ \t]*#/ { next }
             /^[ \t]*$/ { flush(); next }
             { k = tolower($1); sub(/:$/, "", k); $1 = ""; sub(/^ +/, "")
               if (k == "types") types = $0
               else if (k == "suites") suites = $0
               else if (k == "uris") uris = $0
               else if (k == "signed-by") key = $0
               else if (k == "enabled") enabled = tolower($0) }
             END { if (!found) flush() }'
# awk: in a one-line "deb [options] URI SUITE" entry, set key (signed-by)
# and i, the field of the URI
ONE_LINE_ENTRY='
                 key = ""; i = 2
                 if ($2 ~ /^\[/) {
                     for (; i <= NF; i++) {
                         if ($i ~ /^\[?signed-by=/) { key = $i; sub(/^\[?signed-by=/, "", key); sub(/\]$/, "", key) }
                         if ($i ~ /\]$/) { i++; break }
                     }
                 }'

# The machine's own Debian archive for bookworm: its URI and keyring, from
# /etc/apt/sources.list.d/*.sources (deb822) or the one-line lists, so that a
# mirror or a proxy in front of the archive keeps working.  Prints
# "URI KEYRING" (KEYRING may be empty: apt's default keyrings).
debian_archive() {
    local f
    for f in "${APT_ETC:-/etc/apt}"/sources.list.d/*.sources; do
        [ -f "$f" ] && [ "$(basename "$f")" != cxlpod.sources ] || continue
        awk 'function flush(  u) {
                 split(uris, u, " ")
                 if (types ~ /(^| )deb( |$)/ && suites ~ /(^| )bookworm( |$)/ &&
                     enabled != "no" && u[1] != "") { print u[1], key; found = 1; exit }
                 types = suites = uris = key = enabled = "" }'"$DEB822_STANZAS" "$f" | head -n1 | grep . && return 0
    done
    for f in "${APT_ETC:-/etc/apt}"/sources.list "${APT_ETC:-/etc/apt}"/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1 == "deb" {'"$ONE_LINE_ENTRY"'
                 if ($(i + 1) == "bookworm") { print $i, key; exit }
             }' "$f" | head -n1 | grep . && return 0
    done
    return 1
}

# The machine's first enabled entry for SUITE at the archive URI (a
# trailing '/' does not matter) whose types include TYPE (deb, deb-src, or
# any), cxlpod.sources left out: prints "FILE<TAB>TYPES<TAB>KEYRING"
# (KEYRING may be empty), or returns 1.
apt_entry() {
    local type=$1 suite=$2 uri=${3%/} f
    for f in "${APT_ETC:-/etc/apt}"/sources.list.d/*.sources; do
        [ -f "$f" ] && [ "$(basename "$f")" != cxlpod.sources ] || continue
        awk -v type="$type" -v suite="$suite" -v want="$uri" -v file="$f" '
             function has(list, w) { return (" " list " ") ~ (" " w " ") }
             function flush(  i, n, u) {
                 if (enabled != "no" && has(suites, suite) &&
                     (type == "any" || has(types, type))) {
                     n = split(uris, u, " ")
                     for (i = 1; i <= n; i++) {
                         sub(/\/$/, "", u[i])
                         if (u[i] == want) { print file "\t" types "\t" key; found = 1; exit }
                     }
                 }
                 types = suites = uris = key = enabled = "" }'"$DEB822_STANZAS" "$f" | head -n1 | grep . && return 0
    done
    for f in "${APT_ETC:-/etc/apt}"/sources.list "${APT_ETC:-/etc/apt}"/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v type="$type" -v suite="$suite" -v want="$uri" -v file="$f" '
             ($1 == "deb" || $1 == "deb-src") && (type == "any" || $1 == type) {'"$ONE_LINE_ENTRY"'
                 u = $i; sub(/\/$/, "", u)
                 if (u == want && $(i + 1) == suite) { print file "\t" $1 "\t" key; exit }
             }' "$f" | head -n1 | grep . && return 0
    done
    return 1
}

# The text of /etc/apt/sources.list.d/cxlpod.sources for ARCHIVE KEYRING:
# deb bookworm-backports (meson >= 1.5, python3-pycotap) and deb-src trixie
# (QEMU 10.0 source), each only when the machine's sources do not already
# give it for ARCHIVE (apt refuses a second entry for one archive and suite
# with another Signed-By).  An entry of the other type for that suite (deb
# trixie, say) lends its Signed-By (none if it has none), for the same
# reason.  Prints nothing when both are there; says what it left out on
# stderr.
cxlpod_sources() {
    local archive=$1 keyring=$2 type suite e key sep=""
    for e in "deb bookworm-backports" "deb-src trixie"; do
        read -r type suite <<<"$e"
        key=$keyring
        if e=$(apt_entry "$type" "$suite" "$archive"); then
            echo "$type $suite: already in ${e%%$'\t'*}; not added" >&2
            continue
        fi
        if e=$(apt_entry any "$suite" "$archive"); then
            key=${e##*$'\t'}
            echo "$type $suite: with the Signed-By of ${e%%$'\t'*} (${key:-none})" >&2
        fi
        printf '%sTypes: %s\nURIs: %s\nSuites: %s\nComponents: main\n' \
            "$sep" "$type" "$archive" "$suite"
        [ -z "$key" ] || printf 'Signed-By: %s\n' "$key"
        sep=$'\n'
    done
}
