#!/usr/bin/env bash
# The 2+2 trial across two "machines" (scripts/xmach-trial.sh,
# docs/multi-machine.md "The 2+2 trial") without its root and its quarter
# of an hour: --dry-run runs the launcher's --dry-run on the trial's four
# launcher command lines (machine b's QEMUs with the remote pool), and a
# bad argument is refused.
# covers: scripts/xmach-trial.sh
. "$(dirname "$0")/lib.sh"
S=$TOP/scripts
expect "xmach-trial.sh --dry-run" 0 "the trial's launcher options are fine" bash "$S/xmach-trial.sh" --dry-run
expect "xmach-trial.sh --frob is refused" 2 'usage' bash "$S/xmach-trial.sh" --frob
finish
