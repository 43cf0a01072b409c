#!/bin/sh
# A man page made of a program's own --help text, so that the two never
# differ (meson builds the pages of cxlpod-launch and cxlpod-pool with it).
#
#   man-from-help.sh PROGRAM NAME SECTION VERSION SUMMARY [SUBCOMMAND...]
#
# The page has NAME (NAME - SUMMARY), SYNOPSIS and OPTIONS (PROGRAM --help,
# verbatim), one section per SUBCOMMAND (PROGRAM SUBCOMMAND --help) and SEE
# ALSO.  Output on stdout.
set -eu
prog=$1 name=$2 sec=$3 ver=$4 summary=$5
shift 5
# roff: a backslash is \e; a line starting with . or ' is protected by \&
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
help_of() {
    out=$("$@" --help 2>&1) || { echo "man-from-help: '$* --help' failed" >&2; exit 1; }
    [ -n "$out" ] || { echo "man-from-help: '$* --help' printed nothing" >&2; exit 1; }
    printf '%s\n' "$out"
}
upper=$(printf '%s' "$name" | tr a-z A-Z)
printf '.TH %s %s "" "cxlpod %s" "cxlpod"\n' "$upper" "$sec" "$ver"
printf '.SH NAME\n%s \\- %s\n' "$name" "$(printf '%s' "$summary" | esc)"
printf '.SH DESCRIPTION\nThe text below is what\n.B %s \\-\\-help\nprints.\n' "$name"
printf '.SH OPTIONS\n.nf\n'
help_of "$prog" | esc
printf '.fi\n'
for sub in "$@"; do
    printf '.SH "%s %s"\n.nf\n' "$upper" "$(printf '%s' "$sub" | tr a-z A-Z)"
    help_of "$prog" "$sub" | esc
    printf '.fi\n'
done
printf '.SH SEE ALSO\nThe cxlpod documentation (docs/ in its source tree):\nlauncher.md, pool\\-tool.md, your\\-software.md, ci.md, building.md.\n'
