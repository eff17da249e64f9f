# Stops the agent whose pid is saved (SIGTERM: it kills its own processes and exits; SIGKILL
# after 10 s), unless that pid is no longer a tether agent.
set -u
[ -f "$PIDFILE" ] || exit 0
pid=$(cat "$PIDFILE")
if [ -n "$pid" ] && grep -qa -- "--server" "/proc/$pid/cmdline" 2>/dev/null; then
  kill -TERM "$pid" 2>/dev/null || true
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -KILL "$pid" 2>/dev/null || true
  echo "agent stopped (pid $pid)"
fi
rm -f "$PIDFILE"
