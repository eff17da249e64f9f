// The public HTTP API's surface: createApi and its options; everything else stays inside.
export { createApi, API_BODY_LIMIT_BYTES, type ApiOptions } from "./app.ts";
export { SSE_HEARTBEAT_MS } from "./stream.ts";
