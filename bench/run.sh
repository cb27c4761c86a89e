#!/usr/bin/env bash
# The benchmark command: installs what is missing (the venv, and wrk from Debian), then runs
# bench/http_auth.py with any options given (--runs, --duration, --connections).
set -euo pipefail
MAILSVC_EXTRA_DEBS="wrk${MAILSVC_EXTRA_DEBS:+ $MAILSVC_EXTRA_DEBS}"
# shellcheck source=../scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/setup.sh"
exec python -m bench.http_auth "$@"
