# Starts the workspace agent in the background, in its own session (so it outlives Terraform
# and the server), and saves its pid. An agent a lost build left running is stopped first.
set -eu
if [ -f "$PIDFILE" ]; then
  sh "$SCRIPTS/stop-agent.sh" || true
fi
cd "$HOME_DIR"
TETHER_AGENT_TOKEN="$TETHER_AGENT_TOKEN" setsid nohup "$TETHER_BIN" agent \
  --server "$TETHER_SERVER_URL" --dir "$HOME_DIR" >"$AGENT_LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"
echo "agent started (pid $(cat "$PIDFILE"), log $AGENT_LOG)"
