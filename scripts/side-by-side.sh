#!/usr/bin/env bash
# Run several steps of `make test` at once, each timed by timed-step.sh (so the summary lists each with its own
# wall time) and each writing into a file of its own; when all have ended, print each step's output in the order
# given, under a header, so that lines of different steps never interleave.
#   side-by-side.sh LOG DIR 'NAME=COMMAND' ...   LOG: timed-step.sh's log; DIR: where the outputs are kept
# NAME may not contain '='; COMMAND runs under bash -c. Exits 1 if any step failed.
set -uo pipefail
log=${1:?usage: side-by-side.sh LOG DIR 'NAME=COMMAND' ...}
dir=${2:?usage: side-by-side.sh LOG DIR 'NAME=COMMAND' ...}
shift 2
mkdir -p "$dir"
here=$(cd "$(dirname "$0")" && pwd)
pids=()
names=()
for spec in "$@"; do
    name=${spec%%=*}
    command=${spec#*=}
    out="$dir/step-${#pids[@]}.log"
    echo "started: $name (output: $out)"
    "$here/timed-step.sh" "$log" "$name" bash -c "$command" > "$out" 2>&1 &
    pids+=("$!")
    names+=("$name")
done
status=0
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then status=1; fi
done
for i in "${!names[@]}"; do
    printf '\n== %s ==\n' "${names[$i]}"
    cat "$dir/step-$i.log"
done
exit $status
