#!/usr/bin/env bash
# Machine container: an X display, virtual serial ports with a simulated device
# on each far end, the probe desktop app, and the agent(s) dialing the hub.
#
# Every part is essential: when one exits, this script says which and with
# what status, stops the others and exits non-zero, so a broken machine is a
# stopped container with the reason in `docker logs`, never a half-working one.
# tini (PID 1, -g) delivers SIGTERM to the whole process group on `docker stop`.
#
# Environment (docker-compose.yml sets the first three per machine):
#   TETHERBED_MACHINE_ID    the agent's machine id (default: the hostname)
#   TETHERBED_SESSION_ID    the session the data-mode agent serves (required)
#   DISPLAY                 the Xvfb display, e.g. :1
#   TETHERBED_HUB_URL       default ws://hub:8765
#   TETHERBED_OLLAMA_URL    the local LLM (the stack's llm service); unset: none
#   TETHERBED_SCREEN        Xvfb screen, default 1280x800x24
#   TETHERBED_SERIAL_PORTS  names of the virtual ports, default "ttyTB0 ttyTB1"
#                           (client end /dev/NAME, device end $serial_dir/NAME.device)
#   TETHERBED_CONTROL_AGENT 1 (default) also runs a control-mode agent, so the
#                           machine is present in /v1/machines; 0 does not
#   TETHERBED_PROBE_APP     1 (default) runs the probe app when it is installed
#   TETHERBED_WORKSPACE     the data-mode root and control-mode browse root
#   TETHERBED_TOKEN_DIR     where the hub left agent.token (read-only volume)
set -euo pipefail

: "${TETHERBED_MACHINE_ID:=$(hostname)}"
: "${TETHERBED_SESSION_ID:?set TETHERBED_SESSION_ID to the session that the agent serves}"
: "${TETHERBED_HUB_URL:=ws://hub:8765}"
: "${DISPLAY:=:1}"
: "${TETHERBED_SCREEN:=1280x800x24}"
: "${TETHERBED_SERIAL_PORTS:=ttyTB0 ttyTB1}"
: "${TETHERBED_CONTROL_AGENT:=1}"
: "${TETHERBED_PROBE_APP:=1}"
: "${TETHERBED_WORKSPACE:=/workspace}"
: "${TETHERBED_TOKEN_DIR:=/run/tetherbed/tokens}"
: "${TETHERBED_STATE_DIR:=/var/lib/tetherbed/agent}"
export DISPLAY TETHERBED_MACHINE_ID TETHERBED_SESSION_ID TETHERBED_HUB_URL TETHERBED_CONTROL_AGENT
export TETHERBED_TOKEN_DIR

run_dir=/run/tetherbed
serial_dir=$run_dir/serial
python=/opt/tetherbed/bin/python

log() { echo "machine-entrypoint[$TETHERBED_MACHINE_ID]: $*" >&2; }
die() {
    log "$*"
    stop_all
    exit 1
}

declare -A part_of=()  # pid -> which part it is
start() {
    local name=$1
    shift
    "$@" &
    part_of[$!]=$name
    log "started $name (pid $!)"
}
stop_all() {
    local pid
    for pid in "${!part_of[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    wait || true
}
trap 'log "stopping"; stop_all; exit 0' TERM INT

# Waits up to $1 seconds for a command to succeed.
wait_for() {
    local seconds=$1
    shift
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# A restarted container keeps its filesystem: clear what the last run left.
display_number=${DISPLAY#:}
display_number=${display_number%%.*}
rm -rf "$run_dir/serial" "/tmp/.X${display_number}-lock" "/tmp/.X11-unix/X${display_number}"
mkdir -p "$serial_dir" "$TETHERBED_WORKSPACE" "$TETHERBED_STATE_DIR"

# 1. The agent token, written by the hub on its first start.
wait_for 60 test -s "$TETHERBED_TOKEN_DIR/agent.token" ||
    die "no agent token at $TETHERBED_TOKEN_DIR/agent.token after 60 s (is the hub up?)"
# Through the environment, not the command line: `ps` shows no secret.
TETHERBED_AGENT_TOKEN=$(<"$TETHERBED_TOKEN_DIR/agent.token")
export TETHERBED_AGENT_TOKEN

# 2. The display.
start "Xvfb $DISPLAY" Xvfb "$DISPLAY" -screen 0 "$TETHERBED_SCREEN" -nolisten tcp -noreset
wait_for 15 xdpyinfo -display "$DISPLAY" || die "Xvfb did not answer on $DISPLAY within 15 s"

# 3. Virtual serial ports: socat joins two ptys; the simulated device serves
#    the far end, programs (and the agent) open /dev/NAME as a serial port.
manifest="["
serial_args=()
index=0
for name in $TETHERBED_SERIAL_PORTS; do
    port=/dev/$name
    device_end=$serial_dir/$name.device
    serial=$TETHERBED_MACHINE_ID-$name
    desc="Tetherbed simulated Arduino ($serial)"
    rm -f "$port"
    start "socat $name" socat -d \
        "pty,raw,echo=0,link=$port,group=dialout,mode=660" \
        "pty,raw,echo=0,link=$device_end,mode=600"
    wait_for 5 test -e "$port" -a -e "$device_end" || die "socat did not create $port within 5 s"
    start "serial device $name" "$python" -m tetherbed.simulator.peripherals.serial_device \
        serve "$device_end" --serial "$serial" --seed "$index"
    ((index > 0)) && manifest+=","
    manifest+="{\"type\":\"serial\",\"port\":\"$port\",\"desc\":\"$desc\",\"device_end\":\"$device_end\"}"
    serial_args+=(--serial-port "$port=$desc")
    index=$((index + 1))
done
manifest+="]"
# For the healthcheck and for people: what this machine's ports are.
echo "$manifest" >"$serial_dir/ports.json"

# 4. The probe desktop app, once it exists in the installed package.
probe=tetherbed.simulator.peripherals.probe_app
if [[ $TETHERBED_PROBE_APP == 1 ]] &&
    "$python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('$probe') is None)"; then
    start "probe app" "$python" -m "$probe" --display "$DISPLAY" --events "$run_dir/probe-events.jsonl"
fi

# 5. The agent(s). The serial ports are advertised once the agent has the
#    option for it; until then the agent starts without them.
# (The whole help is captured first: `| grep -q` could kill the writer with
# SIGPIPE, which pipefail would report as "no such option".)
agent_help=$(tetherbed agent --help 2>&1 || true)
if [[ $agent_help != *--serial-port* ]]; then
    log "this agent has no --serial-port option; its HELLO lists no serial devices"
    serial_args=()
fi
common=(--hub "$TETHERBED_HUB_URL" --machine-id "$TETHERBED_MACHINE_ID" --state-dir "$TETHERBED_STATE_DIR")
# The local LLM (the compose stack's llm service), when one is configured.
llm_args=()
if [[ -n ${TETHERBED_OLLAMA_URL:-} && $agent_help == *--ollama-url* ]]; then
    llm_args=(--ollama-url "$TETHERBED_OLLAMA_URL")
fi
start "agent (data mode, $TETHERBED_SESSION_ID)" tetherbed agent "${common[@]}" \
    --session-id "$TETHERBED_SESSION_ID" --root "$TETHERBED_WORKSPACE" --enable-shell \
    "${serial_args[@]}" "${llm_args[@]}"
if [[ $TETHERBED_CONTROL_AGENT == 1 ]]; then
    start "agent (control mode)" tetherbed agent "${common[@]}" \
        --browse-root "$TETHERBED_WORKSPACE" "${serial_args[@]}"
fi

# 6. Supervise: the first part to exit stops the machine.
set +e
wait -n -p exited "${!part_of[@]}"
status=$?
set -e
if [[ -n ${exited:-} ]]; then
    die "${part_of[$exited]} (pid $exited) exited with status $status; stopping the machine"
fi
