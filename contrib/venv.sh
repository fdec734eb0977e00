#!/usr/bin/env bash
# Make .venv in the checkout and install the project into it (editable), so the same
# commands work with Debian's own python3, which refuses pip installs outside a
# virtual environment (PEP 668, "externally-managed-environment").
#   bash contrib/venv.sh            # the project (README's run command)
#   bash contrib/venv.sh test       # with extras, e.g. test or spark (tests/run.sh)
#   bash contrib/venv.sh pyspark-4.3   # also pyspark 4.3 into .pyspark-4.3 (pip --target),
#                                      # for tests/run.sh's second Spark tier: put first on
#                                      # PYTHONPATH, it shadows the test extra's pyspark 3.5.9
# On Debian/Ubuntu it apt-get installs python3, python3-venv and python3-dev when
# missing (as root, or with sudo). Afterwards: .venv/bin/logserver, or
# `. .venv/bin/activate` to have logserver and mqtt-bridge on PATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'contrib/venv.sh: ERROR: %s\n' "$*" >&2; exit 1; }

apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "need $* and there is no apt-get"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to apt-get install $*"
        sudo=(sudo)
    fi
    log "apt-get install $*"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ "${1:-}" = pyspark-4.3 ]; then
    [ -x .venv/bin/python ] || die "make .venv first (bash contrib/venv.sh test)"
    if ! PYTHONPATH=.pyspark-4.3 .venv/bin/python -c \
            'import pyspark, sys; sys.exit(not pyspark.__version__.startswith("4.3."))' 2>/dev/null; then
        rm -rf .pyspark-4.3
        log "pip install 'pyspark==4.3.*' into .pyspark-4.3"
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
            .venv/bin/python -m pip install --quiet --target .pyspark-4.3 'pyspark==4.3.*' \
            || die "pip install pyspark 4.3 into .pyspark-4.3 failed"
    fi
    exit 0
fi

command -v python3 >/dev/null 2>&1 || apt_install python3 python3-venv
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "need Python >= 3.11, $(command -v python3) is $(python3 -V 2>&1)"

# A .venv without a working pip (interrupted, or made without ensurepip) is made again.
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    rm -rf .venv
    if ! python3 -m venv .venv >/dev/null 2>&1; then
        rm -rf .venv   # Debian: "ensurepip is not available" without python3-venv
        apt_install python3-venv
        python3 -m venv .venv || die "python3 -m venv .venv failed"
    fi
    log "created .venv ($(.venv/bin/python -V))"
fi

# The compiled record walk needs Python's headers (optional: without them the pure
# Python walk is used); Debian's python3 has them only with python3-dev.
include=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if command -v gcc >/dev/null 2>&1 && [ ! -f "$include/Python.h" ]; then
    apt_install python3-dev || log "no Python headers: the pure-Python record walk is used"
fi

target=.
[ -z "${1:-}" ] || target=".[$1]"
log "pip install -e '$target' into .venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    .venv/bin/python -m pip install --quiet -e "$target"
