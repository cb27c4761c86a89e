#!/usr/bin/env bash
# The performance A/B (docs/benchmarks.md, "Performance A/B") in one command: installs what is
# missing (the venv; wrk, Postfix for smtp-source, smtp-sink and the throw-away baseline
# instances, and OpenDKIM for the signing one, from Debian; see bench/install.sh), then runs
# bench/ab.py: BASE against HEAD (default: the working tree), each built in a throw-away
# directory under /tmp, with any options given (--quick, --rounds N).
#   bench/ab.sh 5997a28            # a base commit against the working tree
#   bench/ab.sh 5997a28 HEAD --quick
#   bench/ab.sh --baselines --rounds 3   # only the two Postfix baselines (plain, and signing)
set -euo pipefail
# shellcheck source=install.sh
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" wrk postfix opendkim opendkim-tools
python -m bench.ab "$@"
