#!/usr/bin/env bash
# Load from two hosts for real (issue 41): `speculab bench --ray HEAD --workers 2` with one client worker on each of
# two "hosts" made on this machine, whose monotonic clocks disagree by --offset seconds.
#
#   bash scripts/two_hosts.sh OUTDIR [--streams N] [--prompts N] [--offset S] [--one-host] [--drop-after N]
#
# Host A (network namespace slth-a, 10.213.41.1): the Ray head, the mock server (--record-send-times: its write
# times on the coordinator's clock) and the coordinator (`speculab bench`). Host B (namespace slth-b, 10.213.41.2,
# joined to A by a veth pair; its own hostname; a time namespace whose CLOCK_MONOTONIC and CLOCK_BOOTTIME run
# --offset seconds ahead): a Ray worker node. Each node offers one CPU, so Ray's SPREAD puts one worker on each.
# The addresses exist inside the two namespaces only; nothing leaves the machine. --one-host: no host B, both
# workers on A (the baseline of bench/README.md's figures). --drop-after N: host B's processes are killed once N
# records are on disk (a host that drops out); the run must end with one line and keep every record it received.
#
# Writes OUTDIR/bench (the run directory), OUTDIR/mock_send_times.json, OUTDIR/logs/ and OUTDIR/result.json
# (scripts/two_hosts_result.py: hosts, workers_by_host, clock_offset_s, max_time_error_s, bound_s, requests_sent,
# requests_ok, ...). Needs root, iproute2's `ip`, util-linux's `unshare` and Ray. Everything it made (namespaces,
# the veth pair, every process inside the namespaces, Ray's temp dir) is removed on exit, even when killed; a run
# killed with SIGKILL leaves them for the next run to remove first. One run at a time (a lock).
set -euo pipefail

usage() {
    echo "usage: bash scripts/two_hosts.sh OUTDIR [--streams N] [--prompts N] [--offset S] [--one-host]" \
        "[--drop-after N]" >&2
    exit 2
}
whole() {  # whole FLAG VALUE: a whole number, or one line naming the flag
    [[ $2 =~ ^[0-9]+$ ]] || { echo "two_hosts: $1 takes a whole number, got '$2'" >&2; exit 2; }
}
[[ $# -ge 1 && $1 != -* ]] || usage
OUT=$1
shift
STREAMS=64 PROMPTS=256 OFFSET=5 ONE_HOST=0 DROP_AFTER=
while [[ $# -gt 0 ]]; do
    case $1 in
        --streams | --prompts | --offset | --drop-after)
            [[ $# -ge 2 ]] || usage
            whole "$1" "$2" ;;&
        --streams) STREAMS=$2; shift 2 ;;
        --prompts) PROMPTS=$2; shift 2 ;;
        --offset) OFFSET=$2; shift 2 ;;  # whole seconds: what `unshare --monotonic` takes
        --one-host) ONE_HOST=1; shift ;;
        --drop-after) DROP_AFTER=$2; shift 2 ;;
        *) usage ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
NS_A=slth-a NS_B=slth-b
NET=10.213.41
A_IP=$NET.1 B_IP=$NET.2
RAY_PORT=6390 MOCK_PORT=8041
RAY_TMP=/tmp/slth-ray           # short: Ray's unix socket paths live under it (108 bytes at most)
OBJECT_STORE=100000000          # Ray's floor is 75 MiB; the workers pass only small messages
MAX_S=300                       # the load's time bound: past it, bench is interrupted (exit 130)
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" RAY_USAGE_STATS_ENABLED=0
# Ray (2.60 here) authenticates nodes and drivers with a token: one made for this run, held in the environment of every
# process the script starts (never written to disk), as a real cluster hands one to each node
RAY_AUTH_TOKEN=$($PY -c "import secrets; print(secrets.token_hex(32))")
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN

die() { echo "two_hosts: $*" >&2; exit 2; }
[[ $(id -u) == 0 ]] || die "needs root (network and time namespaces); run it with sudo"
for tool in ip unshare hostname timeout; do
    command -v $tool >/dev/null || die "needs \`$tool\` (apt-get install iproute2 util-linux coreutils)"
done
$PY -c "import ray" 2>/dev/null || die "needs Ray: pip install 'speculab[ray]'"

# one run at a time: the names and addresses below are fixed, so that a killed run's leftovers can be found. The lock
# is a directory holding its owner's pid (not an inherited descriptor, which a process left behind would keep)
LOCK=/tmp/slth.lock.d
take_lock() {
    local holder= _
    for _ in $(seq 1200); do
        if mkdir "$LOCK" 2>/dev/null; then
            echo $$ >"$LOCK/pid"
            return 0
        fi
        holder=$(cat "$LOCK/pid" 2>/dev/null || true)
        if [[ -n $holder ]] && ! kill -0 "$holder" 2>/dev/null; then
            rm -rf "$LOCK"  # its run was killed: the cleanup below removes the rest
        else
            sleep 0.1
        fi
    done
    die "another two_hosts.sh run (pid ${holder:-?}) holds $LOCK; wait for it, or remove $LOCK if there is none"
}
take_lock

cleanup() {
    set +e  # every step is tried, whatever failed before it
    [[ -n ${DROPPER:-} ]] && kill "$DROPPER" 2>/dev/null
    # every process inside our namespaces (Ray's daemons, its workers, the mock, the coordinator), by pid: never
    # by name, which would reach other Ray clusters on this machine
    local ns pids
    for sig in TERM KILL; do
        pids=
        for ns in $NS_B $NS_A; do
            [[ -e /run/netns/$ns ]] && pids+=" $(ip netns pids $ns 2>/dev/null | tr '\n' ' ')"
        done
        [[ -n ${pids// /} ]] || break
        kill -$sig $pids 2>/dev/null || true
        [[ $sig == TERM ]] && for _ in $(seq 30); do
            sleep 0.2
            alive=0
            for p in $pids; do [[ -d /proc/$p ]] && alive=1; done
            [[ $alive == 0 ]] && break
        done
    done
    for ns in $NS_B $NS_A; do ip netns del $ns 2>/dev/null || true; done  # the veth pair goes with them
    rm -rf "$RAY_TMP"
}
release_lock() { [[ $(cat "$LOCK/pid" 2>/dev/null) == "$$" ]] && rm -rf "$LOCK"; }
on_exit() {
    local rc=$?
    trap - EXIT INT TERM HUP
    cleanup
    release_lock
    exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap '' PIPE  # a reader gone (a closed terminal, a killed test runner) must not end the script before its cleanup
cleanup  # a previous run killed with SIGKILL

# --- the hosts ---
ip netns add $NS_A
ip -n $NS_A link set lo up
if [[ $ONE_HOST == 0 ]]; then
    ip netns add $NS_B
    ip -n $NS_B link set lo up
    ip link add slth-a0 netns $NS_A type veth peer name slth-b0 netns $NS_B
    ip -n $NS_B addr add $B_IP/24 dev slth-b0
    ip -n $NS_B link set slth-b0 up
    # a default route on the veth: Ray finds a node's address by the route to a public address (no packet is sent)
    ip -n $NS_B route add default dev slth-b0
else
    # host A alone keeps its address, on a veth pair of its own (kernels without the dummy driver have veth)
    ip link add slth-a0 netns $NS_A type veth peer name slth-a1 netns $NS_A
    ip -n $NS_A link set slth-a1 up
fi
ip -n $NS_A addr add $A_IP/24 dev slth-a0
ip -n $NS_A link set slth-a0 up
ip -n $NS_A route add default dev slth-a0

mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
# a long command in the background, waited for: bash runs a trap only once a foreground command ends, so a TERM
# would wait for the whole run; `wait` returns at once
waited() {
    "$@" &
    wait $!
}
IN_A=(ip netns exec $NS_A unshare --uts sh -c 'hostname slth-a && exec "$@"' sh)  # host A: its own hostname
in_a() { "${IN_A[@]}" "$@"; }
in_b() {  # host B: its own hostname, and its monotonic clocks OFFSET seconds ahead (a time namespace)
    ip netns exec $NS_B unshare --uts --time --monotonic "$OFFSET" --boottime "$OFFSET" --fork \
        sh -c 'hostname slth-b && exec "$@"' sh "$@"
}
wait_port() {  # wait_port IP PORT WHAT LOG
    for _ in $(seq 300); do
        ip netns exec $NS_A bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null && return 0
        sleep 0.1
    done
    die "$3 did not listen on $1:$2 within 30 s; see $4"
}

# --- the mock server and the Ray cluster ---
in_a $PY -m speculab mock-server --host $A_IP --port $MOCK_PORT --ttft-ms 50 --gap-ms 20 --output-tokens 8 \
    --record-send-times >"$OUT/logs/mock.log" 2>&1 &
head_cpus=$((ONE_HOST ? 2 : 1))
waited in_a $PY -m ray.scripts.scripts start --head --node-ip-address $A_IP --port $RAY_PORT --num-cpus $head_cpus \
    --object-store-memory $OBJECT_STORE --include-dashboard=false --disable-usage-stats --temp-dir "$RAY_TMP" \
    >"$OUT/logs/ray-head.log" 2>&1 || die "the Ray head did not start; see $OUT/logs/ray-head.log"
if [[ $ONE_HOST == 0 ]]; then
    waited in_b $PY -m ray.scripts.scripts start --address $A_IP:$RAY_PORT --node-ip-address $B_IP --num-cpus 1 \
        --object-store-memory $OBJECT_STORE --disable-usage-stats \
        >"$OUT/logs/ray-worker.log" 2>&1 || die "the Ray worker node did not start; see $OUT/logs/ray-worker.log"
fi
wait_port $A_IP $MOCK_PORT "the mock server" "$OUT/logs/mock.log"

# --- the load ---
if [[ -n $DROP_AFTER ]]; then
    (   # once DROP_AFTER records are on disk: every process of host B killed at once, as a host that dies
        for _ in $(seq $((MAX_S * 20))); do
            [[ -f $OUT/bench/requests.jsonl && $(wc -l <"$OUT/bench/requests.jsonl") -ge $DROP_AFTER ]] && break
            sleep 0.05
        done
        kill -KILL $(ip netns pids $NS_B) 2>/dev/null
        wc -l <"$OUT/bench/requests.jsonl" >"$OUT/logs/dropped_at_records"
    ) &
    DROPPER=$!
fi
set +e
waited timeout -s INT "$MAX_S" "${IN_A[@]}" $PY -m speculab bench --url http://$A_IP:$MOCK_PORT \
    --ray $A_IP:$RAY_PORT --workers 2 --workload synthetic:input=16,output=8 --concurrency "$STREAMS" --num-prompts "$PROMPTS" --warmup 2 \
    --seed 0 --max-tokens 8 --output "$OUT/bench" >"$OUT/logs/bench.out" 2>"$OUT/logs/bench.err"
bench_rc=$?
set -e
ip netns exec $NS_A $PY -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(
    'http://$A_IP:$MOCK_PORT/mock/send_times', timeout=30).read().decode())" >"$OUT/mock_send_times.json"
$PY "$ROOT/scripts/two_hosts_result.py" "$OUT" --offset "$([[ $ONE_HOST == 1 ]] && echo 0 || echo "$OFFSET")" \
    --hosts $((2 - ONE_HOST)) --bench-exit "$bench_rc" --streams "$STREAMS" --prompts "$PROMPTS" \
    ${DROP_AFTER:+--dropped}
