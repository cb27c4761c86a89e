#!/usr/bin/env bash
# The sending benchmarks (issue 4) in one command: installs what is missing (the venv; wrk,
# and Postfix for smtp-source and the throw-away relay, from Debian), then runs
# bench/sending.py with any options given (e.g. --only http, --runs 3, --processes 1,2).
#
# Postfix is installed without letting the package configure or start a system instance:
# debconf answers "No configuration", and a temporary /usr/sbin/policy-rc.d refuses every
# service start during the installation (removed afterwards if we created it).
set -euo pipefail
created_policy=""
cleanup() { if [ -n "$created_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT
if ! dpkg -s postfix >/dev/null 2>&1 || ! dpkg -s libsasl2-modules >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then echo "run as root to install postfix" >&2; exit 1; fi
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    created_policy=1
  fi
fi
# libsasl2-modules: the PLAIN mechanism of Postfix's SASL client (the relay authenticates).
MAILSVC_EXTRA_DEBS="wrk postfix libsasl2-modules${MAILSVC_EXTRA_DEBS:+ $MAILSVC_EXTRA_DEBS}"
# shellcheck source=../scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/setup.sh"
cleanup
created_policy=""
python -m bench.sending "$@"
