#!/usr/bin/env bash
# scripts/ctest_skips.sh BUILD_DIR [CONSOLE_LOG]: one line per skipped test of the last
# ctest run in BUILD_DIR, with the reason the test printed, read from ctest's full log
# (BUILD_DIR/Testing/Temporary/LastTest.log, which keeps the output of every test,
# passed or skipped, where the console shows only failures'):
#
#   test_photos photos_exact_equal_pil: no photo set (...)   one CDB_TEST of a program
#   test_serve_page: no playwright-core (...)                a shell test
#
# The reasons are the lines tests print: "    skip: REASON" before "SKIP NAME" (cdb_test.h's
# CDB_SKIP), "SKIP NAME: REASON" or "SKIP: REASON" (the shell tests). LastTest.log calls
# a skipped program (exit 77) passed, so a program that skipped without a word is found
# in CONSOLE_LOG, ctest's console output ("The following tests did not run: ...
# (Skipped)"), and listed as "(no reason printed)". Prints nothing when nothing was
# skipped; exit 0 either way (1 when there is no LastTest.log).
set -euo pipefail
log="${1:?usage: ctest_skips.sh BUILD_DIR [CONSOLE_LOG]}/Testing/Temporary/LastTest.log"
console=${2:-/dev/null}
[ -f "$log" ] || { echo "ctest_skips: no $log" >&2; exit 1; }
[ -f "$console" ] || console=/dev/null
awk -v console="$console" '
  BEGIN { # the console: "	 13 - test_photos (Skipped)"
    while ((getline line < console) > 0)
      if (line ~ /^[ \t]*[0-9]+ - [^ ]+ \(Skipped\)/) { split(line, f, " "); skipped[f[3]] = 1 }
  }
  /^[0-9]+\/[0-9]+ Test: / { name = $3; reason = ""; next }
  /^Output:$/ { out = 1; next }
  /^<end of output>$/ { out = 0; next }
  out && /^ *skip: / { sub(/^ *skip: /, ""); reason = $0; next }
  out && /^SKIP [^ :]+$/ {
    print name " " $2 ": " (reason != "" ? reason : "(no reason printed)")
    reason = ""; listed[name] = 1; next
  }
  out && /^SKIP( [^ :]+)?: / { sub(/^SKIP( [^ :]+)?: /, ""); print name ": " $0; listed[name] = 1 }
  END { for (t in skipped) if (!(t in listed)) print t ": (no reason printed)" }
' "$log"
