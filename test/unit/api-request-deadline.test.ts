// Every request of liken's API clients has a deadline (src/api/kubeconfig.ts,
// REQUEST_TIMEOUT_MS): a connection that died under a request (a half-open socket) never
// answers, and without a deadline the request, and the operator's pass that awaits it, waits
// forever. A plain HTTP server on an ephemeral port stands for an API server that took the
// request and went silent; the deadline is shortened for the test.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { LikenApi } from "../../src/api/client.js";
import { reuseConnections } from "../../src/api/kubeconfig.js";
import { API_ERROR_CODES, ApiError } from "../../src/api/errors.js";
import { plainKubeConfig } from "../support/plain-kubeconfig.js";

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = undefined;
});

/** An API server that reads each request and never answers it; counts what it took. */
async function silentServer(): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  server = http.createServer((req) => {
    requests++;
    req.resume();
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
  };
}

function kubeConfigFor(url: string, requestTimeoutMs: number): KubeConfig {
  return reuseConnections(plainKubeConfig(url), { requestTimeoutMs });
}

describe("a request the API server never answers", () => {
  it("fails at its deadline as LIKEN_API_UNAVAILABLE, naming the deadline", async () => {
    const api = await silentServer();
    const client = new LikenApi(kubeConfigFor(api.url, 400));
    const began = Date.now();
    const err = await client.clusters.get("lab").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe(API_ERROR_CODES.unavailable);
    expect((err as ApiError).message).toContain("before the request's deadline");
    expect(api.requests()).toBe(1);
    // The deadline, not the test's own timeout, ended it.
    expect(Date.now() - began).toBeLessThan(5_000);
  });
});
