// The environment of every process the server starts for a workspace (the local agent,
// Terraform and what a template runs): an allowlist, never the server's own environment, so no
// provider key, database URL, cloud credential or TETHER_* secret reaches a workspace command.
// Secrets a child needs (its agent token) are passed explicitly in `extra`.

/** Variables passed through from the server's environment when set (plus every `LC_*`). */
export const CHILD_ENV_ALLOWLIST = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TERM",
  "TZ",
  "TMPDIR",
] as const;

/**
 * The allowlisted part of `from` (the server's environment by default), then `extra`. An
 * `extra` entry that is undefined removes the variable.
 */
export function childEnv(
  extra: Record<string, string | undefined> = {},
  from: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(from)) {
    if (value === undefined) continue;
    if ((CHILD_ENV_ALLOWLIST as readonly string[]).includes(name) || name.startsWith("LC_"))
      env[name] = value;
  }
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}
