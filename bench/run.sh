#!/usr/bin/env bash
# The benchmark command: installs what is missing (the venv, and wrk from Debian), then runs
# bench/http_auth.py with any options given (--runs, --duration, --connections).
set -euo pipefail
# shellcheck source=install.sh
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" wrk
exec python -m bench.http_auth "$@"
