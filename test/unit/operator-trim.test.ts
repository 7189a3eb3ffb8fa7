// What the operator keeps of a watched object (src/operator/run/trim.ts), table by table.
import { describe, expect, it } from "vitest";
import { LAST_APPLIED, trimLease, trimObject } from "../../src/operator/run/trim.js";

describe("trimObject: managedFields and kubectl's last-applied copy go, the rest stays", () => {
  it("drops managedFields, in place", () => {
    const o = {
      metadata: {
        name: "m1",
        resourceVersion: "7",
        labels: { zone: "a" },
        annotations: { keep: "yes", [LAST_APPLIED]: "{...}" },
        managedFields: [{ manager: "liken-agent", fieldsV1: { "f:status": {} } }],
      },
      spec: { cluster: "c" },
      status: { step: "Ready" },
    };
    const t = trimObject(o);
    expect(t).toBe(o);
    expect(t).toEqual({
      metadata: {
        name: "m1",
        resourceVersion: "7",
        labels: { zone: "a" },
        annotations: { keep: "yes" },
      },
      spec: { cluster: "c" },
      status: { step: "Ready" },
    });
  });

  it("an annotations map left empty goes too", () => {
    const t = trimObject({ metadata: { name: "c", annotations: { [LAST_APPLIED]: "{}" } } });
    expect(t).toEqual({ metadata: { name: "c" } });
  });
});

describe("trimLease: exactly what heartbeats.ts reads", () => {
  it("name, resourceVersion, the machine label and renewTime", () => {
    const l = {
      metadata: {
        name: "m1",
        namespace: "liken-heartbeats",
        resourceVersion: "9",
        labels: { "liken.sh/machine": "m1", "liken.sh/cluster": "c" },
        managedFields: [{ manager: "liken-agent" }],
      },
      spec: {
        holderIdentity: "m1",
        leaseDurationSeconds: 40,
        renewTime: "2026-12-05T05:00:00.000000Z",
      },
    };
    expect(trimLease(l)).toEqual({
      metadata: { name: "m1", resourceVersion: "9", labels: { "liken.sh/machine": "m1" } },
      spec: { renewTime: "2026-12-05T05:00:00.000000Z" },
    });
  });

  it("a Lease never renewed keeps no spec", () => {
    expect(trimLease({ metadata: { name: "m2" } })).toEqual({ metadata: { name: "m2" } });
  });
});
