# Shared helpers for cxlpod's scripts.  Sourced, never run.
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${CXLPOD_BUILD:-$TOP/build}
LOGDIR=$BUILD/logs
mkdir -p "$LOGDIR"
log()  { printf '[cxlpod] %s\n' "$*" >&2; }
warn() { printf '[cxlpod] warning: %s\n' "$*" >&2; }
die()  { printf '[cxlpod] error: %s\n' "$*" >&2; exit 1; }
