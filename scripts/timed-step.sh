#!/usr/bin/env bash
# Run one step of `make test` and note its wall time and the machine's CPU time meanwhile, so that the last step
# can print them all.
#   timed-step.sh LOG NAME COMMAND...   appends "NAME<TAB>SECONDS<TAB>EXIT<TAB>START<TAB>END<TAB>BUSY0<TAB>BUSY1"
#                                       to LOG (epoch seconds; BUSY: the machine's busy CPU-seconds since boot at
#                                       the start and the end, from /proc/stat) and exits with COMMAND's status; a
#                                       copy of its output goes to LOG.NAME.out
#   timed-step.sh --summary LOG         prints the table of LOG's steps and the total wall time, first start to last
#                                       end (steps that ran side by side overlap), and the machine's busy CPU time
#                                       against what its cores had; exits 1 if a step failed, after
#                                       naming what failed in it: CI keeps only the last lines of a run, so they
#                                       must say which cases failed, not only which step
set -uo pipefail
output_of() { printf '%s.%s.out' "$1" "$(printf '%s' "$2" | tr -c 'A-Za-z0-9' '-')"; }
if [ "${1:-}" = "--summary" ]; then
    log=${2:?usage: timed-step.sh --summary LOG}
    [ -s "$log" ] || exit 0
    # CPU: what the whole machine used while the step ran (every process, daemons and JVMs that outlive their
    # parent too); steps side by side each show the CPU of all of them
    awk -F'\t' -v cores="$(nproc)" '
                BEGIN { printf "\n%-52s %9s %9s  %s\n", "make test: step", "wall", "CPU", "exit" }
                { sum += $2; printf "%-52s %7.0f s %7.0f s  %s\n", $1, $2, $7 - $6, $3
                  if ($4 != "") { if (first == "" || $4 < first) { first = $4; busy0 = $6 }
                                  if ($5 > last) { last = $5; busy1 = $7 } } }
                END { total = (first != "") ? last - first : sum
                      printf "%-52s %7.0f s  (%.1f min; the steps add up to %.0f s)\n", "total wall time", total,
                             total / 60, sum
                      if (total > 0 && busy1 != "")
                          printf "%-52s %7.0f s  (%.0f%% of the %.0f CPU-s that %d cores had in that time)\n",
                                 "machine CPU time", busy1 - busy0, 100 * (busy1 - busy0) / (cores * total),
                                 cores * total, cores }' "$log"
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
# the machine's busy CPU-seconds since boot: user, nice, system, irq, softirq and steal ticks of /proc/stat's
# first line. (Not the step's own processes' times: a JVM or a daemon that outlives its parent is never waited for,
# and bash's `times` missed a third of the CPU that way.)
busy() { awk -v hz="$(getconf CLK_TCK)" 'NR == 1 { printf "%.1f", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' \
    /proc/stat; }
start=$(date +%s.%N)
busy0=$(busy)
"$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
busy1=$(busy)
end=$(date +%s.%N)
awk -v n="$name" -v s="$start" -v e="$end" -v x="$status" -v b0="$busy0" -v b1="$busy1" \
    'BEGIN { printf "%s\t%.1f\t%s\t%.1f\t%.1f\t%s\t%s\n", n, e - s, x, s, e, b0, b1 }' >> "$log"
exit $status
