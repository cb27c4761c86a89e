#!/usr/bin/env bash
# The delivery benchmark (issue 5) in one command: installs what is missing (the venv; Postfix
# for smtp-sink, smtp-source and the throw-away baseline instance, from Debian), then runs
# bench/delivery.py with any options given (e.g. --messages 20000 --runs 3 --nodes 1,2 --rss 1000000).
#
# Postfix is installed without letting the package configure or start a system instance:
# debconf answers "No configuration", and a temporary /usr/sbin/policy-rc.d refuses every
# service start during the installation (removed afterwards if we created it).
set -euo pipefail
created_policy=""
cleanup() { if [ -n "$created_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT
if ! dpkg -s postfix >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then echo "run as root to install postfix" >&2; exit 1; fi
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    created_policy=1
  fi
fi
MAILSVC_EXTRA_DEBS="postfix${MAILSVC_EXTRA_DEBS:+ $MAILSVC_EXTRA_DEBS}"
# shellcheck source=../scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/setup.sh"
cleanup
created_policy=""
python -m bench.delivery "$@"
