// How failures of API requests become LIKEN_API_* errors: the status code and the
// server's reason decide the code and whether a retry can help.
import { ApiException, KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  ApiError,
  ConflictError,
  LikenApi,
  codeFor,
  isConflict,
  isSilent,
  parseStatus,
  toApiError,
  type Cluster,
} from "../../src/api/index.js";
import { isLikenError } from "../../src/errors.js";

const op = { verb: "update status of", kind: "Cluster", name: "lab" };

function exception(code: number, status: object | string): ApiException<string> {
  const body = typeof status === "string" ? status : JSON.stringify(status);
  return new ApiException(code, `HTTP-Code: ${code}\nMessage: x\nBody: ${body}`, body, {});
}

describe("codeFor", () => {
  it.each([
    [409, "Conflict", "LIKEN_API_CONFLICT"],
    [409, "AlreadyExists", "LIKEN_API_ALREADY_EXISTS"],
    [404, "NotFound", "LIKEN_API_NOT_FOUND"],
    [422, "Invalid", "LIKEN_API_INVALID"],
    [400, "BadRequest", "LIKEN_API_INVALID"],
    [403, "Forbidden", "LIKEN_API_FORBIDDEN"],
    [401, "Unauthorized", "LIKEN_API_UNAUTHORIZED"],
    [410, "Expired", "LIKEN_API_GONE"],
    [429, "TooManyRequests", "LIKEN_API_UNAVAILABLE"],
    [503, "ServiceUnavailable", "LIKEN_API_UNAVAILABLE"],
    [418, undefined, "LIKEN_API_REQUEST"],
  ])("%i %s -> %s", (status, reason, code) => {
    expect(codeFor(status, reason)).toBe(code);
  });
});

describe("toApiError", () => {
  it("a 409 Conflict is a retryable ConflictError carrying the server's Status", () => {
    const e = toApiError(
      exception(409, {
        kind: "Status",
        reason: "Conflict",
        code: 409,
        message:
          'Operation cannot be fulfilled on clusters.liken.sh "lab": the object has been modified',
      }),
      op,
    );
    expect(e).toBeInstanceOf(ConflictError);
    expect(isConflict(e)).toBe(true);
    expect(isLikenError(e, "LIKEN_API_CONFLICT")).toBe(true);
    expect(e.retryable).toBe(true);
    expect(e.httpStatus).toBe(409);
    expect(e.message).toContain("update status of Cluster lab");
    expect(e.message).toContain("the object has been modified");
    expect(e.message).toContain("read it again and retry");
  });

  it("a 409 AlreadyExists is not a conflict and not retryable", () => {
    const e = toApiError(
      exception(409, { kind: "Status", reason: "AlreadyExists", code: 409 }),
      op,
    );
    expect(e).not.toBeInstanceOf(ConflictError);
    expect(e.code).toBe("LIKEN_API_ALREADY_EXISTS");
    expect(e.retryable).toBe(false);
  });

  it("a 422 keeps the server's message and field causes whole", () => {
    const message =
      'Cluster.liken.sh "lab" is invalid: spec.version: Invalid value: "string": spec.version "9" names no entry';
    const e = toApiError(
      exception(422, {
        kind: "Status",
        reason: "Invalid",
        code: 422,
        message,
        details: { causes: [{ reason: "FieldValueInvalid", field: "spec.version", message: "x" }] },
      }),
      op,
    );
    expect(e.code).toBe("LIKEN_API_INVALID");
    expect(e.retryable).toBe(false);
    expect(e.message).toContain(message);
    expect(e.causes).toEqual([
      { reason: "FieldValueInvalid", field: "spec.version", message: "x" },
    ]);
  });

  it("a body that is not a Status still yields the code from the HTTP status", () => {
    const e = toApiError(exception(503, "upstream connect error"), op);
    expect(e.code).toBe("LIKEN_API_UNAVAILABLE");
    expect(e.retryable).toBe(true);
    expect(e.status).toBeUndefined();
  });

  it("no answer at all (connection refused) is unavailable and retryable", () => {
    const cause = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), {
      code: "ECONNREFUSED",
    });
    const e = toApiError(cause, op);
    expect(e.code).toBe("LIKEN_API_UNAVAILABLE");
    expect(e.retryable).toBe(true);
    expect(e.cause).toBe(cause);
  });

  it("a watch failure (statusCode) maps like a request failure", () => {
    const e = toApiError(Object.assign(new Error("Gone"), { statusCode: 410 }), op);
    expect(e.code).toBe("LIKEN_API_GONE");
  });

  it("an ApiError passes through unchanged", () => {
    const original = new ApiError("LIKEN_API_FORBIDDEN", "no");
    expect(toApiError(original, op)).toBe(original);
  });
});

describe("parseStatus", () => {
  it.each([
    ['{"kind":"Status","code":404}', 404],
    [{ kind: "Status", code: 410 }, 410],
  ])("parses %j", (body, code) => {
    expect(parseStatus(body)?.code).toBe(code);
  });

  it.each([["not json"], ['{"kind":"Cluster"}'], [undefined], [null]])("refuses %j", (body) => {
    expect(parseStatus(body)).toBeUndefined();
  });
});

describe("status writes are always conditioned", () => {
  it("replaceStatus refuses an object without resourceVersion before sending anything", async () => {
    const kc = new KubeConfig();
    // Port 1 on loopback: nothing listens; a request would fail with UNAVAILABLE instead.
    kc.loadFromClusterAndUser(
      { name: "nowhere", server: "https://127.0.0.1:1", skipTLSVerify: false },
      { name: "u" },
    );
    const api = new LikenApi(kc);
    const cluster: Cluster = {
      apiVersion: "liken.sh/v1alpha1",
      kind: "Cluster",
      metadata: { name: "lab" },
      spec: { releases: { source: "https://releases.liken.sh" } },
    };
    await expect(api.clusters.replaceStatus(cluster)).rejects.toMatchObject({
      code: "LIKEN_API_USAGE",
    });
    cluster.metadata.resourceVersion = "7";
    await expect(api.clusters.replaceStatus(cluster)).rejects.toMatchObject({
      code: "LIKEN_API_UNAVAILABLE",
    });
  });
});

describe("isSilent", () => {
  const now = new Date("2026-12-02T12:00:40Z");
  it.each([
    ["never renewed", undefined, true],
    ["renewed 39.999 s ago", new Date("2026-12-02T12:00:00.001Z"), false],
    ["renewed exactly 40 s ago", new Date("2026-12-02T12:00:00Z"), true],
    ["renewed 41 s ago", new Date("2026-12-02T11:59:59Z"), true],
  ])("%s -> %s", (_what, renewTime, silent) => {
    expect(isSilent({ renewTime }, now)).toBe(silent);
  });
});
