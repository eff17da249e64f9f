// Graceful stop for long-running commands: the first SIGTERM or SIGINT runs `close`, then
// the process exits 0 (1 if closing failed); later signals are ignored while it closes.

export function stopOnSignals(close: () => Promise<void>): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`error while stopping: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}
