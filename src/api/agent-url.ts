// The rules an agent URL passes when it is registered or changed (POST/PATCH workspaces):
// credentials in it are refused, and a member's URL must resolve to public addresses only. The
// answer is who the URL was checked as (`workspaces.url_checked_as`): the AgentPool checks a
// member's URL again on every connection, so passing here once does not let a name that
// resolves elsewhere later (DNS rebinding) reach a private address. An admin's or owner's URL
// may point anywhere: they run the server's network.

import dns from "node:dns/promises";
import net from "node:net";
import type { UrlCheckedAs } from "../chatd/agents.ts";
import { isPublicAddress, type AddressPolicy } from "../contract/index.ts";
import { ApiError } from "./errors.ts";

/** A host name's addresses, as dns.lookup with `all: true` answers them. */
export type ResolveHost = (hostname: string) => Promise<{ address: string; family: number }[]>;

export interface AgentUrlRules {
  /** The addresses a member's agent may have; public ones (isPublicAddress) by default. */
  allow?: AddressPolicy;
  /** Resolves a host name at registration; the system resolver (dns.lookup) by default. */
  resolve?: ResolveHost;
}

const systemResolve: ResolveHost = (hostname) => dns.lookup(hostname, { all: true });

/** `url` with its credentials (user:password@) removed; as it is when it has none. */
export function withoutCredentials(url: string): string {
  if (!URL.canParse(url)) return url;
  const u = new URL(url);
  if (u.username === "" && u.password === "") return url;
  u.username = "";
  u.password = "";
  return u.toString();
}

/**
 * Checks an (already http(s)) agent URL set by an admin or owner (`byStaff`) or a member: 400 for credentials in it or a name that
 * does not resolve, 403 when a member's URL has an address that is not allowed. Resolves to
 * who it was checked as.
 */
export async function checkAgentUrl(
  rules: AgentUrlRules,
  byStaff: boolean,
  agentUrl: string,
): Promise<Exclude<UrlCheckedAs, null>> {
  const url = new URL(agentUrl);
  if (url.username !== "" || url.password !== "") {
    throw ApiError.coded(
      "agent_url_credentials",
      "An agent URL must not carry credentials (user:password@host): send the agent's token as agent_token.",
      "agent_url",
    );
  }
  if (byStaff) return "admin";
  const allow = rules.allow ?? isPublicAddress;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  let addresses: { address: string; family: number }[];
  if (net.isIP(host) !== 0) {
    addresses = [{ address: host, family: net.isIP(host) }];
  } else {
    try {
      addresses = await (rules.resolve ?? systemResolve)(host);
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) {
      throw ApiError.coded(
        "agent_url_unresolvable",
        `The agent URL's host ${host} does not resolve, so its address cannot be checked.`,
        "agent_url",
      );
    }
  }
  if (addresses.some((a) => !allow(a.address, a.family === 6 ? 6 : 4))) {
    throw ApiError.coded(
      "private_agent_address",
      "Only an admin or owner can register an agent on a loopback, private, link-local or other non-public address.",
      "agent_url: ask an admin to register this workspace, or use an agent on a public address",
    );
  }
  return "member";
}
