import { describe, expect, it } from "vitest";
import { isPublicAddress } from "./address-policy.ts";

describe("isPublicAddress", () => {
  it("loopback, private, link-local, CGNAT, metadata, unspecified, multicast and reserved addresses are not public", () => {
    for (const a of [
      "127.0.0.1",
      "127.255.255.254",
      "10.1.2.3",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "169.254.169.254",
      "169.254.0.1",
      "100.64.0.1",
      "100.127.255.255",
      "0.0.0.0",
      "0.1.2.3",
      "224.0.0.1",
      "239.255.255.250",
      "255.255.255.255",
      "240.0.0.1",
      "192.0.2.1",
      "198.18.0.1",
      "::",
      "::1",
      "fe80::1",
      "fe80::1%eth0",
      "fc00::1",
      "fd00:ec2::254",
      "ff02::1",
      "2001:db8::1",
      "fec0::1",
    ]) {
      expect(isPublicAddress(a), a).toBe(false);
    }
  });

  it("an IPv6 address carrying an IPv4 one is judged by it (mapped, compatible, NAT64, 6to4)", () => {
    for (const a of [
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "::FFFF:169.254.169.254",
      "::ffff:a9fe:a9fe",
      "::ffff:10.0.0.1",
      "::127.0.0.1",
      "64:ff9b::10.0.0.1",
      "64:ff9b::a9fe:a9fe",
      "2002:7f00:1::",
      "2002:c0a8:101::1",
      "0:0:0:0:0:ffff:7f00:0001",
    ]) {
      expect(isPublicAddress(a), a).toBe(false);
    }
    for (const a of ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]) {
      expect(isPublicAddress(a), a).toBe(true);
    }
  });

  it("global unicast addresses are public; what is not an IP address is not", () => {
    for (const a of [
      "8.8.8.8",
      "1.1.1.1",
      "93.184.215.14",
      "100.63.255.255",
      "172.32.0.1",
      "2606:4700::1111",
      "2a00:1450:4001:80b::200e",
    ]) {
      expect(isPublicAddress(a), a).toBe(true);
    }
    for (const a of [
      "localhost",
      "example.com",
      "",
      "1.2.3",
      "::ffff:1.2.3.4.5",
      "8.8.8.8.",
      "[::1]",
    ]) {
      expect(isPublicAddress(a), a).toBe(false);
    }
    expect(isPublicAddress("8.8.8.8", 6)).toBe(false);
  });
});
