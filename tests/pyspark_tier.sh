# The second Spark tier of tests/run.sh (sourced; bash): Spark's Kafka connector tests, the
# streaming demo and the leader-kill cluster tests again under pyspark 4.3 (Scala 2.13), with the connector jars of
# ../shared/jars/spark-4.3 (tests/helpers/spark_support.py picks the folder of the pyspark it
# runs; SPARK_KAFKA_JARS_4_3 overrides it). pyspark 4.3 sits in .pyspark-4.3, first on
# PYTHONPATH. It runs in the background, beside the parallel (xdist) part and never beside
# the `alone` part, on a port range no xdist worker uses (docs/spark.md).
#   pyspark_tier_install           # pip install into .pyspark-4.3; a failure stops the run
#   pyspark_tier_ports             # sets XDIST_PORTS and TIER_PORTS (CHILDPROC_PORTS ranges)
#   pyspark_tier_start             # starts the tier, its output in a log file
#   pyspark_tier_wait              # waits, prints the log; non-zero when the tier failed
# The caller defines PY (the python with the test extra), log and die.

# The tier's tests (the coverage table of docs/spark.md says what runs where): the connector
# tests, the demo (streaming through the connector), and the cluster tests that kill a
# partition leader under a running query (one of them with a processing-time trigger).
PYSPARK_TIER_TESTS=(
    tests/spark/test_spark_kafka_connector.py
    tests/spark/test_spark_kafka_connector_options.py
    tests/spark/test_spark_demo.py
    tests/spark/test_cluster_spark.py
    tests/spark/test_cluster_spark_exactly_once.py
)

pyspark_tier_install() {
    bash contrib/venv.sh pyspark-4.3 || die "pip install of pyspark 4.3 into .pyspark-4.3 failed"
    PYTHONPATH="$PWD/.pyspark-4.3" "$PY" -c \
        'import pyspark, sys; sys.exit(not pyspark.__version__.startswith("4.3."))' \
        || die "pyspark 4.3 not importable from .pyspark-4.3"
}

# free_port's range (commonlib/childproc.py: CHILDPROC_PORTS, else 10000 up to the ephemeral
# range) split in two: the top fifth for the tier (one process), the rest for the xdist
# workers, which tests/conftest.py (_own_port_range) slices again, one slice per worker.
pyspark_tier_ports() {
    local low high split
    read -r low high < <("$PY" -c 'from commonlib.childproc import port_range; print(*port_range())') \
        || die "cannot read free_port's range"
    split=$((high - (high - low) / 5))
    XDIST_PORTS="$low-$split"
    TIER_PORTS="$split-$high"
}

pyspark_tier_start() {
    PYSPARK_TIER_LOG=$(mktemp "${TMPDIR:-/tmp}/pyspark-4.3-tier.XXXXXX.log")
    log "pyspark 4.3 tier in the background (ports $TIER_PORTS, output in $PYSPARK_TIER_LOG): ${PYSPARK_TIER_TESTS[*]}"
    # Its own process group (set -m), so that an interrupted run stops all of it.
    set -m
    env PYTHONPATH="$PWD/.pyspark-4.3${PYTHONPATH:+:$PYTHONPATH}" \
        SPARK_KAFKA_JARS="${SPARK_KAFKA_JARS_4_3:-}" CHILDPROC_PORTS="$TIER_PORTS" \
        "$PY" -m pytest -p no:xdist -p no:cacheprovider --durations=10 "${PYSPARK_TIER_TESTS[@]}" \
        >"$PYSPARK_TIER_LOG" 2>&1 </dev/null &
    PYSPARK_TIER_PID=$!
    set +m
    trap 'pyspark_tier_stop' EXIT
}

# An interrupted or failed run: the tier's process group goes too (its own pid).
pyspark_tier_stop() {
    if [ -n "${PYSPARK_TIER_PID:-}" ] && kill -0 "$PYSPARK_TIER_PID" 2>/dev/null; then
        kill -- -"$PYSPARK_TIER_PID" 2>/dev/null || true
    fi
}

pyspark_tier_wait() {
    local rc=0
    log "waiting for the pyspark 4.3 tier (pid $PYSPARK_TIER_PID)"
    wait "$PYSPARK_TIER_PID" || rc=$?
    PYSPARK_TIER_PID=
    log "pyspark 4.3 tier output ($PYSPARK_TIER_LOG):"
    cat "$PYSPARK_TIER_LOG" >&2
    if ((rc)); then
        printf 'tests/run.sh: ERROR: the pyspark 4.3 tier FAILED (pytest exit %s; output above, in %s)\n' \
            "$rc" "$PYSPARK_TIER_LOG" >&2
    else
        log "pyspark 4.3 tier passed"
    fi
    return "$rc"
}
