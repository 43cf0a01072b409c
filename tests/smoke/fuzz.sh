#!/usr/bin/env bash
# scripts/fuzz.sh as docs/device.md's long run calls it (--jobs 2: libFuzzer
# in fork mode), for 3 s; the suite's unit test fuzz-doorbell runs one job
# for 30 s.  Bad arguments are refused.
# covers: scripts/fuzz.sh
. "$(dirname "$0")/lib.sh"
export CXLPOD_BUILD=$BUILD
expect "fuzz.sh --seconds 3 --jobs 2" 0 'fuzz-doorbell: .* in 3 s, .*no finding' bash "$TOP/scripts/fuzz.sh" --seconds 3 --jobs 2
expect "fuzz.sh --jobs 0 is refused" 1 'positive numbers' bash "$TOP/scripts/fuzz.sh" --jobs 0
expect "fuzz.sh --frob is refused" 1 'unknown argument' bash "$TOP/scripts/fuzz.sh" --frob
finish
