// The public HTTP API's surface: createApi and its options; everything else stays inside.
export { createApi, API_BODY_LIMIT_BYTES } from "./app.ts";
export type { ApiOptions } from "./context.ts";
export { SSE_HEARTBEAT_MS } from "./stream.ts";
