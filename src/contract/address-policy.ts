// Which IP addresses are public: the AddressPolicy (transport.ts) of agents a member registered.
// A member's agent URL must not make the server a probe of its own network, so the server
// connects for it only to globally routable unicast addresses — never loopback, private
// (RFC 1918, ULA fc00::/7), link-local (169.254/16, fe80::/10, and so the cloud metadata
// service at 169.254.169.254 and fd00:ec2::254), CGNAT (100.64/10), "this host" (0.0.0.0/8,
// ::), multicast, broadcast, documentation, benchmarking or reserved ranges. An IPv6 address
// that carries an IPv4 one (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64
// 64:ff9b::/96, 6to4 2002::/16) is judged by the IPv4 address it carries. The check runs on
// the address a connection is about to use (after DNS), so a name that later resolves
// elsewhere (DNS rebinding) is checked again every time.

import net from "node:net";

/** IPv4 ranges that are not public. */
const IPV4_NOT_PUBLIC: [string, number][] = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8], // RFC 1918
  ["100.64.0.0", 10], // CGNAT, RFC 6598
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local (the metadata service's 169.254.169.254)
  ["172.16.0.0", 12], // RFC 1918
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // TEST-NET-1
  ["192.88.99.0", 24], // 6to4 relay anycast
  ["192.168.0.0", 16], // RFC 1918
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // TEST-NET-2
  ["203.0.113.0", 24], // TEST-NET-3
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, and 255.255.255.255 broadcast
];

/** IPv6 ranges that are not public (beyond "outside 2000::/3", which is checked first). */
const IPV6_NOT_PUBLIC: [string, number][] = [
  ["2001::", 23], // IETF protocol assignments (Teredo, ORCHID, …)
  ["2001:db8::", 32], // documentation
  ["3fff::", 20], // documentation
];

const v4NotPublic = new net.BlockList();
for (const [a, p] of IPV4_NOT_PUBLIC) v4NotPublic.addSubnet(a, p, "ipv4");
const v6NotPublic = new net.BlockList();
for (const [a, p] of IPV6_NOT_PUBLIC) v6NotPublic.addSubnet(a, p, "ipv6");
/** Global unicast: every public IPv6 address is in here (ULA, link-local, multicast are not). */
const v6GlobalUnicast = new net.BlockList();
v6GlobalUnicast.addSubnet("2000::", 3, "ipv6");

/** The eight 16-bit groups of an IPv6 address (one net.isIPv6 accepts), or undefined. */
function ipv6Groups(address: string): number[] | undefined {
  let a = address.toLowerCase();
  const zone = a.indexOf("%");
  if (zone >= 0) a = a.slice(0, zone);
  // A trailing dotted quad is two groups.
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(a);
  if (quad) {
    const [b0, b1, b2, b3] = quad.slice(1).map(Number) as [number, number, number, number];
    a = `${a.slice(0, quad.index)}${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const halves = a.split("::");
  if (halves.length > 2) return undefined;
  const parse = (s: string) => (s === "" ? [] : s.split(":").map((g) => parseInt(g, 16)));
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  const fill = 8 - head.length - tail.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return undefined;
  const groups = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail];
  return groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

function ipv4Of(hi: number, lo: number): string {
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join(".");
}

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if any. */
function embeddedIpv4(g: number[]): string | undefined {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && (g[5] === 0xffff || g[5] === 0)) return ipv4Of(g[6]!, g[7]!); // ::ffff:a.b.c.d, ::a.b.c.d
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return ipv4Of(g[6]!, g[7]!); // NAT64
  if (g[0] === 0x2002) return ipv4Of(g[1]!, g[2]!); // 6to4
  return undefined;
}

/**
 * Whether `address` (an IP literal) is a public unicast address. Anything that is not an IP
 * address is not public. An AddressPolicy: give it as `allowAddress`.
 */
export function isPublicAddress(address: string, family?: 4 | 6): boolean {
  const kind = family ?? net.isIP(address);
  if (kind === 4) return net.isIPv4(address) && !v4NotPublic.check(address, "ipv4");
  if (kind !== 6 || !net.isIPv6(address)) return false;
  const groups = ipv6Groups(address);
  if (!groups) return false;
  const v4 = embeddedIpv4(groups);
  if (v4 !== undefined) return !v4NotPublic.check(v4, "ipv4");
  const normal = groups.map((x) => x.toString(16)).join(":");
  return v6GlobalUnicast.check(normal, "ipv6") && !v6NotPublic.check(normal, "ipv6");
}
