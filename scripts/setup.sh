# Sourced by scripts/serve and scripts/test: installs what is missing, then activates .venv.
# Debian packages: the PostgreSQL server (embedded store) and python3-venv. Python packages:
# the project and its test extras, re-installed only when setup.cfg changes.
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
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "run as root to install ${missing[*]}" >&2; exit 1; fi
  # The service runs its own clusters: keep the package from creating and starting one.
  mkdir -p /etc/postgresql-common
  [ -f /etc/postgresql-common/createcluster.conf ] \
    || echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
export PATH="$top/.venv/bin:$PATH"
# twistd finds the plugin in twisted/plugins/ under the checkout.
export PYTHONPATH="$top${PYTHONPATH:+:$PYTHONPATH}"
