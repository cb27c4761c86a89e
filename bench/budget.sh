#!/usr/bin/env bash
# The CPU budget per message (docs/benchmarks.md, "CPU budget per message") before and after:
# installs what is missing (the venv; Postfix for smtp-sink, from Debian; see bench/install.sh;
# py-spy, with pip, is bench/budget.py's), then runs bench/budget.py at BEFORE and then at AFTER
# (default: the working tree), back to back, each commit's servers run from a `git archive` of
# it in a throw-away directory (as bench/ab.sh does), and prints both columns of the table.
#   bench/budget.sh 2226211                      # that commit, then the working tree
#   bench/budget.sh 2226211 HEAD --messages 5000 --json /tmp/budget.json
set -euo pipefail
if [ $# -lt 1 ] || [[ $1 == -* ]]; then
    echo "usage: bench/budget.sh BEFORE [AFTER] [bench/budget.py options]" >&2
    exit 2
fi
before=$1
shift
after=()
if [ $# -gt 0 ] && [[ $1 != -* ]]; then
    after=(--after "$1")
    shift
fi
# shellcheck source=install.sh
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" postfix
python -m bench.budget --before "$before" "${after[@]}" "$@"
