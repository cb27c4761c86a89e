#!/usr/bin/env bash
# The delivery benchmark in one command: installs what is missing (the venv; Postfix
# for smtp-sink, smtp-source and the throw-away baseline instance, from Debian; see
# bench/install.sh), then runs bench/delivery.py with any options given
# (e.g. --messages 20000 --runs 3 --nodes 1,2 --rss 1000000).
set -euo pipefail
# shellcheck source=install.sh
source "$(dirname "${BASH_SOURCE[0]}")/install.sh" postfix
python -m bench.delivery "$@"
