/** The `default` of an exhaustive switch: adding a case breaks the build where it is not handled. */
export function assertNever(x: never): never {
  throw new Error(`Unexpected value: ${JSON.stringify(x)}`);
}
