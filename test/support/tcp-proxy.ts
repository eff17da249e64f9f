// A TCP front for dial-out agents in tests: a load balancer (each new connection goes to the
// first target that accepts it, so an agent whose server died reaches a surviving one) that can
// also cut connections — all of them now, or each one at the next bytes coming back from the
// agent (the answer to the request just sent), which is dropped, not forwarded.

import net from "node:net";
import type { AddressInfo } from "node:net";

export interface TcpProxy {
  url: string;
  /** Replaces the targets (`host:port`), tried in order for each new connection. */
  setTargets(targets: string[]): void;
  /** Destroys every open connection (both sides). */
  cutAll(): void;
  /** Open connections stay open but carry nothing more, either way (a dead network path). */
  freezeAll(): void;
  /** The next bytes any agent sends back are dropped and its connection cut; resolves then. */
  cutOnNextAgentBytes(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targets: string[]): Promise<TcpProxy> {
  let list = targets;
  const open = new Set<net.Socket>();
  const frozen = new WeakSet<net.Socket>();
  let armed: (() => void) | undefined;

  const connectFirst = (i: number, onUp: (s: net.Socket) => void, onNone: () => void): void => {
    const t = list[i];
    if (t === undefined) return onNone();
    const [host, port] = [t.slice(0, t.lastIndexOf(":")), Number(t.slice(t.lastIndexOf(":") + 1))];
    const up = net.connect({ host, port });
    up.once("connect", () => {
      up.removeAllListeners("error");
      onUp(up);
    });
    up.once("error", () => connectFirst(i + 1, onUp, onNone));
  };

  const server = net.createServer((agent) => {
    open.add(agent);
    agent.pause();
    agent.on("error", () => undefined);
    agent.once("close", () => open.delete(agent));
    connectFirst(
      0,
      (up) => {
        open.add(up);
        up.on("error", () => undefined);
        up.once("close", () => {
          open.delete(up);
          agent.destroy();
        });
        agent.once("close", () => up.destroy());
        up.on("data", (chunk: Buffer) => {
          if (!frozen.has(up)) agent.write(chunk);
        });
        agent.on("data", (chunk: Buffer) => {
          if (frozen.has(agent)) return;
          if (armed) {
            const done = armed;
            armed = undefined;
            agent.destroy();
            up.destroy();
            done();
            return;
          }
          up.write(chunk);
        });
        agent.resume();
      },
      () => agent.destroy(),
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    setTargets(t) {
      list = t;
    },
    cutAll() {
      for (const s of open) s.destroy();
    },
    freezeAll() {
      for (const s of open) frozen.add(s);
    },
    cutOnNextAgentBytes() {
      return new Promise<void>((resolve) => (armed = resolve));
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** `host:port` of an `http://host:port` URL. */
export function hostPort(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port}`;
}
