// The liken.sh API: everything else in liken talks to Kubernetes through this module.
export * from "./types.js";
export * from "./time.js";
export * from "./errors.js";
export * from "./client.js";
export * from "./watch.js";
export * from "./heartbeat.js";
export * from "./kubeconfig.js";
