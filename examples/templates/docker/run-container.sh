# Runs the workspace container: host network, the home volume at /home/workspace, the server's
# node and checkout read-only (MOUNT_TETHER), and the agent dialing out with its token.
set -eu
docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
set -- --network host --hostname "tether-$(printf %s "$WORKSPACE_NAME" | tr -c 'A-Za-z0-9-' '-' | cut -c1-40)" \
  -v "$VOLUME:/home/workspace"
if [ -n "$MOUNT_TETHER" ]; then
  node=$(readlink -f "$(command -v node)")
  set -- "$@" -v "$node:/usr/local/bin/node:ro" -v "$CHECKOUT:$CHECKOUT:ro"
fi
docker run -d --restart unless-stopped --name "$CONTAINER" --label tether.workspace="$CONTAINER" "$@" \
  -e TETHER_AGENT_TOKEN "$IMAGE" \
  "$TETHER_BIN" agent --server "$TETHER_SERVER_URL" --dir /home/workspace
echo "container $CONTAINER started"
