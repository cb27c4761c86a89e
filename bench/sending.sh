#!/usr/bin/env bash
# The sending benchmarks in one command: installs what is missing (the venv; wrk,
# and Postfix for smtp-source and the throw-away relay, from Debian; see bench/install.sh),
# then runs bench/sending.py with any options given (e.g. --only http, --runs 3, --processes 1,2).
set -euo pipefail
# libsasl2-modules: the PLAIN mechanism of Postfix's SASL client (the relay authenticates).
# shellcheck source=install.sh
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" wrk postfix libsasl2-modules
python -m bench.sending "$@"
