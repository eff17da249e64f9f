// Metrics in the Prometheus text exposition format: a registry a server owns and scrapes.
export {
  Counter,
  DEFAULT_SECONDS_BUCKETS,
  EXPOSITION_CONTENT_TYPE,
  Gauge,
  Histogram,
  Registry,
  type Labels,
} from "./registry.ts";
