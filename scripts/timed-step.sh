#!/usr/bin/env bash
# Run one step of `make test` and note its wall time and CPU time, so that the last step can print them all.
#   timed-step.sh LOG NAME COMMAND...   appends "NAME<TAB>SECONDS<TAB>EXIT<TAB>START<TAB>END<TAB>CPU" to LOG (epoch
#                                       seconds; CPU: the user and system seconds of COMMAND and of every process
#                                       under it that was waited for, i.e. all but daemons that left their parent)
#                                       and exits with COMMAND's status; a copy of its output goes to LOG.NAME.out
#   timed-step.sh --summary LOG         prints the table of LOG's steps and the total wall time, first start to last
#                                       end (steps that ran side by side overlap), and the CPU time of the steps
#                                       against what the cores had in that time; exits 1 if a step failed, after
#                                       naming what failed in it: CI keeps only the last lines of a run, so they
#                                       must say which cases failed, not only which step
set -uo pipefail
output_of() { printf '%s.%s.out' "$1" "$(printf '%s' "$2" | tr -c 'A-Za-z0-9' '-')"; }
if [ "${1:-}" = "--summary" ]; then
    log=${2:?usage: timed-step.sh --summary LOG}
    [ -s "$log" ] || exit 0
    awk -F'\t' -v cores="$(nproc)" '
                BEGIN { printf "\n%-52s %9s %9s  %s\n", "make test: step", "wall", "CPU", "exit" }
                { sum += $2; cpu += $6; printf "%-52s %7.0f s %7.0f s  %s\n", $1, $2, $6, $3
                  if ($4 != "") { if (first == "" || $4 < first) first = $4; if ($5 > last) last = $5 } }
                END { total = (first != "") ? last - first : sum
                      printf "%-52s %7.0f s  (%.1f min; the steps add up to %.0f s)\n", "total wall time", total,
                             total / 60, sum
                      if (total > 0)
                          printf "%-52s %7.0f s  (%.0f%% of the %.0f CPU-s that %d cores had in that time)\n",
                                 "total CPU time", cpu, 100 * cpu / (cores * total), cores * total, cores }' "$log"
    failed=$(awk -F'\t' '$3 != 0 { printf "%s%s", sep, $1; sep = "; " }' "$log")
    if [ -n "$failed" ]; then
        # pytest's summary lines and `interop run`'s per-case lines of each failed step, else its last lines
        awk -F'\t' '$3 != 0 { print $1 }' "$log" | while IFS= read -r name; do
            out=$(output_of "$log" "$name")
            [ -f "$out" ] || continue
            echo "make test: failed in '$name':"
            cases=$(grep -aE '^(FAILED|ERROR) |\] +(FAILED|ERROR) ' "$out" | sort -u)
            if [ -n "$cases" ]; then
                printf '%s\n' "$cases" | head -n 10 | cut -c1-300 | sed 's/^/  /'
                more=$(( $(printf '%s\n' "$cases" | wc -l) - 10 ))
                [ "$more" -gt 0 ] && echo "  ... and $more more (in $out)"
            else
                tail -n 5 "$out" | cut -c1-300 | sed 's/^/  /'
            fi
        done
        echo "make test: FAILED: $failed (their output is above)"
        exit 1
    fi
    exit 0
fi
log=${1:?usage: timed-step.sh LOG NAME COMMAND...}
name=${2:?usage: timed-step.sh LOG NAME COMMAND...}
shift 2
out=$(output_of "$log" "$name")
start=$(date +%s.%N)
"$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
end=$(date +%s.%N)
# `times`' second line: the user and system time of this shell's children, each "XmY.YYYs"; the command's
# processes are among them once the pipeline above has been waited for. (Run here, not in a pipe or $(...): a
# subshell would report its own children, none.)
times > "$out.times"
cpu=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); n += p[1] * 60 + p[2] } print n }' \
    "$out.times")
rm -f "$out.times"
awk -v n="$name" -v s="$start" -v e="$end" -v x="$status" -v c="$cpu" \
    'BEGIN { printf "%s\t%.1f\t%s\t%.1f\t%.1f\t%.1f\n", n, e - s, x, s, e, c }' >> "$log"
exit $status
