# Sourced by scripts/serve and scripts/test: installs what is missing, then activates .venv.
# Debian packages: the PostgreSQL server (embedded store) and python3-venv. Python packages:
# the project and its test extras, re-installed only when setup.cfg changes.
# With MAILSVC_TEST_DEPS=1 (scripts/test sets it) also what only the tests use: swaks (with
# Net::SSLeay for its TLS), Postfix (smtp-sink, smtp-source; never configured nor started),
# Node.js and npm when missing, Chromium (the builder's and the dashboard's browser tests drive
# Debian's package through Playwright; no browser is ever downloaded), tor (the onion service
# test starts its own with networking disabled; the package's daemon is not started),
# SpamAssassin's spamd (the spam score; network tests off, packaged rules only), and the pinned
# npm packages of tests/node, the SDK and axe-core (re-installed only when their package files change).
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$top"

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "mailsvc needs Python 3.11 or newer ($python is $("$python" -V 2>&1))" >&2; exit 1; }

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || missing+=(postgresql)
"$python" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
for extra in ${MAILSVC_EXTRA_DEBS:-}; do
  dpkg -s "$extra" >/dev/null 2>&1 || missing+=("$extra")
done
if [ "${MAILSVC_TEST_DEPS:-}" = 1 ]; then
  command -v swaks >/dev/null || missing+=(swaks)
  perl -MNet::SSLeay -e 1 2>/dev/null || missing+=(libnet-ssleay-perl)
  [ -x /usr/sbin/smtp-sink ] && [ -x /usr/sbin/smtp-source ] || missing+=(postfix)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  # The builder's and the dashboard's browser tests: Debian's Chromium, driven by Playwright.
  command -v chromium >/dev/null || missing+=(chromium)
  # The spam score: Debian's SpamAssassin with its packaged rules (never sa-update);
  # the tests start their own spamd on loopback.
  command -v spamd >/dev/null || missing+=(spamd)
  command -v spamassassin >/dev/null || missing+=(spamassassin)
  # The package test builds the .deb (dpkg-buildpackage, debhelper) with Debian's python3.
  command -v dpkg-buildpackage >/dev/null || missing+=(dpkg-dev)
  command -v dh >/dev/null || missing+=(debhelper)
  /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
  # The onion service test runs its own tor (networking disabled; the package's daemon is
  # kept from starting like Postfix's).
  command -v tor >/dev/null || missing+=(tor)
  # The time partitions test (docs/operations.md, "Time partitions"): the embedded cluster runs
  # Debian's PostgreSQL binaries, so installing pg_partman puts its extension files where the
  # test's cluster finds them; the embedded default never does CREATE EXTENSION.
  pg_share="$(ls -d /usr/share/postgresql/*/ 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$pg_share" ] && [ -f "${pg_share}extension/pg_partman.control" ] \
    || missing+=("postgresql-$(basename "${pg_share:-15}")-partman")
  # The pg_auto_failover drill (tests/system/test_autofailover.py) makes its own monitor and nodes
  # with pg_autoctl; the packages start nothing.
  command -v pg_autoctl >/dev/null || missing+=(pg-auto-failover-cli)
  ls /usr/lib/postgresql/*/lib/pgautofailover.so >/dev/null 2>&1 || missing+=(postgresql-15-auto-failover)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "run as root to install ${missing[*]}" >&2; exit 1; fi
  # The service runs its own clusters: keep the package from creating and starting one.
  mkdir -p /etc/postgresql-common
  [ -f /etc/postgresql-common/createcluster.conf ] \
    || echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
  # Postfix is wanted for its tools only: no configuration, and no daemon started while
  # installing (a temporary policy-rc.d refuses every start; removed if we created it).
  policy_created=""
  if [[ " ${missing[*]} " == *" postfix "* ]]; then
    echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  fi
  # Likewise tor and OpenDKIM: the tests and the A/B (bench/ab.py) start their own.
  if [[ " ${missing[*]} " == *" postfix "* || " ${missing[*]} " == *" tor "* || " ${missing[*]} " == *" opendkim "* ]]; then
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod 755 /usr/sbin/policy-rc.d
      policy_created=1
    fi
  fi
  apt-get update -qq
  apt_status=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || apt_status=$?
  if [ -n "$policy_created" ]; then rm -f /usr/sbin/policy-rc.d; fi
  [ "$apt_status" -eq 0 ] || { echo "apt-get install failed ($apt_status)" >&2; exit "$apt_status"; }
fi

if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.mailsvc-installed"
want="$(sha256sum setup.cfg pyproject.toml | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  echo "$want" > "$stamp"
fi
if [ "${MAILSVC_TEST_DEPS:-}" = 1 ]; then
  # pg_autoctl's clusters (tests/system/test_autofailover.py) put their sockets in Debian's directory,
  # which tmpfiles.d makes at boot: a machine that did not boot with systemd may lack it.
  if [ "$(id -u)" -eq 0 ]; then install -d -o postgres -g postgres -m 2775 /var/run/postgresql; fi
  node_stamp="tests/node/node_modules/.mailsvc-installed"
  node_want="$(sha256sum tests/node/package.json tests/node/package-lock.json | sha256sum | cut -c1-16)"
  if [ "$(cat "$node_stamp" 2>/dev/null)" != "$node_want" ]; then
    echo "installing npm packages into tests/node/node_modules"
    (cd tests/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$node_want" > "$node_stamp"
  fi
fi
export PATH="$top/.venv/bin:$PATH"
# twistd finds the plugin in twisted/plugins/ under the checkout.
export PYTHONPATH="$top${PYTHONPATH:+:$PYTHONPATH}"
