#!/usr/bin/env bash
# Writes the man page of jobprof-record (roff, on stdout) from the binary's
# own --help texts: `jobprof-record --help` and `jobprof-record COMMAND
# --help` for every command its usage lists. The recorder stays std-only (no
# clap, no man page generator inside it); this runs at release time
# (scripts/release.sh), so the page never drifts from --help.
#
# Usage: scripts/recorder-man.sh PATH/TO/jobprof-record > jobprof-record.1
set -euo pipefail
rec=${1:?usage: $0 PATH/TO/jobprof-record}

# roff-safe text: backslashes, leading dots and quotes, minus signs.
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" -e 's/-/\\-/g'; }

top=$("$rec" --help)
version=$("$rec" --version | awk '{print $2}')
summary=$(printf '%s\n' "$top" | head -1 | sed 's/^jobprof-record: //')
commands=$(printf '%s\n' "$top" | sed -n 's/^  jobprof-record \([a-z-]*\) .*/\1/p')
[ -n "$commands" ] || { echo "recorder-man: no commands in '$rec --help'" >&2; exit 1; }

printf '.TH JOBPROF\\-RECORD 1 "" "jobprof-record %s" "User Commands"\n' "$version"
printf '.SH NAME\njobprof\\-record \\- %s\n' "$(printf '%s' "$summary" | esc)"
printf '.SH SYNOPSIS\n.nf\n'
printf '%s\n' "$top" | sed -n '/^Usage:/,/^$/p' | sed '1d;/^$/d;s/^  //' | esc
printf '.fi\n.SH DESCRIPTION\n'
# The paragraphs after the usage block; a blank line starts a new one.
printf '%s\n' "$top" | sed -n '/^Usage:/,$p' | sed '1,/^$/d' | esc | sed 's/^$/.PP/'
printf '.SH COMMANDS\n'
for c in $commands; do
  printf '.SS %s\n.nf\n' "$c"
  # Everything after the first line (the command's own one-line summary).
  "$rec" "$c" --help | sed '1d' | sed '1{/^$/d}' | esc
  printf '.fi\n'
done
printf '.SH SEE ALSO\n\\fBjobprof\\fR(1), \\fBjobprof\\-process\\fR(1), \\fBperf\\-record\\fR(1)\n'
