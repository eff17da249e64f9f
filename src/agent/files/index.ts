// The workspace agent's file operations (CONTRACT.md 7, Files) as plain async functions that
// the routes wire in. Each answers with an Answer for every input, never a throw: bad input is
// a 400, a missing file a 404, a permission problem a 403, anything else a 500.

export { readFile } from "./read.ts";
export { readFileLines } from "./lines.ts";
export { writeFile } from "./write.ts";
export { editFiles } from "./edit.ts";
// Split forms for routes that refuse bad input before the tool call middleware records it.
export { parseWritePath } from "./write.ts";
export { applyEdits, parseEditFilesRequest } from "./edit.ts";
export type { Parsed } from "./errors.ts";
export { listDirectory } from "./list.ts";
