# Sourced by the bench/*.sh scripts, with the Debian packages the benchmark needs as arguments
# (e.g. `source bench/install.sh wrk postfix`): installs what is missing (the venv, and those
# packages, through scripts/setup.sh), then activates .venv and moves to the checkout.
#
# Postfix is installed without letting the package configure or start a system instance:
# scripts/setup.sh answers debconf "No configuration" and puts a temporary
# /usr/sbin/policy-rc.d in place that refuses every service start during the installation
# (removed afterwards if it created it).
MAILSVC_EXTRA_DEBS="$*${MAILSVC_EXTRA_DEBS:+ $MAILSVC_EXTRA_DEBS}"
# shellcheck source=../scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/setup.sh"
