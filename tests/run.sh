#!/usr/bin/env bash
# The one test command (README, .ci/run): installs what the tests need on a fresh
# Debian machine (run as root): system packages with apt-get, Python packages into
# .venv in the checkout; then lints and runs the whole suite with .venv's python.
#   bash tests/run.sh                 # everything, in parallel (pytest-xdist)
#   bash tests/run.sh -m 'not slow'   # extra arguments go to pytest
#   PYTEST_WORKERS=2 bash tests/run.sh   # how many workers (0: one process, no xdist);
#                                        # a -n of your own wins
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'tests/run.sh: ERROR: %s\n' "$*" >&2; exit 1; }

# --- system packages: kcat (librdkafka CLI), mosquitto and its clients (MQTT bridge tests)
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v mosquitto_pub >/dev/null 2>&1 || missing+=(mosquitto-clients)
command -v mosquitto >/dev/null 2>&1 || missing+=(mosquitto)   # the MQTT benchmark's peer
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)   # PySpark pipelines
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)   # Java client tests (tests/java)
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)   # Node.js client tests (tests/js, npm ci)
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)   # the power-loss tests' fsync shim
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)   # cluster mode's coordination service
command -v chromium >/dev/null 2>&1 || missing+=(chromium)   # MQTT over WebSockets in a real browser (Playwright)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)   # network namespaces of the cluster partition tests
if ((${#missing[@]})); then
    command -v apt-get >/dev/null 2>&1 || die "need ${missing[*]} and there is no apt-get"
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to apt-get install ${missing[*]}"
        SUDO=(sudo)
    fi
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update
    "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
kcat -V >/dev/null 2>&1 || die "kcat is installed but 'kcat -V' fails"
command -v mosquitto_pub >/dev/null 2>&1 || die "mosquitto_pub missing after install"
java -version >/dev/null 2>&1 || die "java is installed but 'java -version' fails"
command -v gcc >/dev/null 2>&1 || die "gcc missing after install"
etcd --version >/dev/null 2>&1 || die "etcd (etcd-server) is installed but 'etcd --version' fails"
command -v chromium >/dev/null 2>&1 || die "chromium missing after install"
command -v javac >/dev/null 2>&1 || die "javac missing after install"
command -v npm >/dev/null 2>&1 || die "npm missing after install"

# --- Python packages: the project and its test extras, in .venv (contrib/venv.sh;
# Debian's own python3 refuses pip installs outside a virtual environment, PEP 668)
bash contrib/venv.sh test
PY=.venv/bin/python
export PATH="$PWD/.venv/bin:$PATH"   # the console scripts (logserver, mqtt-bridge)
"$PY" -c 'import kafka, aiokafka, confluent_kafka, pytest, pytest_timeout, xdist, aetcd' \
    || die "test dependencies not importable after pip install"

# Byte-compile the tree once: every server, bridge, CLI call and worker process the tests
# start imports ~600 modules, and where PYTHONDONTWRITEBYTECODE is set (as on CI) each of
# them compiled this tree's modules from source again (about 0.3 s of CPU per server start,
# a few thousand processes per run; docs/testing.md). Python still reads the .pyc files
# and recompiles any whose source changed since.
"$PY" -m compileall -q -j 0 commonlib kafkaproto logserver mqtt_bridge spark_examples tests >/dev/null
# The same for the codecs a server compiles before it listens (kafkaproto/code_cache.py:
# about 0.4 s of CPU per server start).
"$PY" -c "from kafkaproto import code_cache, registry; registry.precompile(); code_cache.save(force=True)"

log "ruff check ."
"$PY" -m ruff check .

log "mypy (kafkaproto, commonlib, logserver, mqtt_bridge)"
"$PY" -m mypy

# Parallel: the tests mostly wait on servers, clients and the network, so more workers
# than cores pay; 4 on CI's 2 cores leaves headroom for the brokers' 3 s session timeouts
# (docs/testing.md). Each worker gets its own port range (tests/conftest.py) and every
# test its own data dir and etcd.
# --dist loadgroup: the Spark tests share one worker (one JVM; tests/conftest.py).
workers=(-n "${PYTEST_WORKERS:-4}" --dist loadgroup)
for arg in "$@"; do
    case "$arg" in
        -n|-n*|--numprocesses|--numprocesses=*|-pno:xdist|no:xdist) workers=() ;;
    esac
done
# --durations: the slowest tests in every run's output (CI's log keeps them).
if (($#)); then
    log "pytest ${workers[*]} --durations=30 $*"
    exec "$PY" -m pytest "${workers[@]}" --durations=30 "$@"
fi
# The whole suite: in parallel, then the few tests marked `alone` with nothing beside
# them (they check millisecond guarantees, e.g. a 200 ms retention pass, that a machine
# loaded by the other workers cannot keep; docs/testing.md). Beside the parallel part runs
# the second Spark tier, under pyspark 4.3 (tests/pyspark_tier.sh; docs/spark.md), on ports
# of its own; its failure fails the run.
source tests/pyspark_tier.sh
pyspark_tier_install
pyspark_tier_ports
pyspark_tier_start
log "pytest ${workers[*]} --durations=30 -m 'not alone' (ports $XDIST_PORTS)"
status=0
CHILDPROC_PORTS="$XDIST_PORTS" "$PY" -m pytest "${workers[@]}" --durations=30 -m "not alone" || status=$?
pyspark_tier_wait || status=$((status ? status : $?))
log "pytest -p no:xdist --durations=10 -m alone"
"$PY" -m pytest -p no:xdist --durations=10 -m alone || status=$((status ? status : $?))
exit "$status"
