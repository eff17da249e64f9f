// Parses a `HOST:PORT` listen address (IPv6 hosts in brackets); port 0 picks a free port.

export interface ListenAddress {
  host: string;
  port: number;
}

export function parseListen(value: string): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new Error(
      `Invalid listen address "${value}": use HOST:PORT, e.g. 127.0.0.1:0 or [::1]:8080.`,
    );
  }
  return { host: m[1] ?? (m[2] || "0.0.0.0"), port };
}
