import { describe, expect, it } from "vitest";
import type { V1Node } from "@kubernetes/client-node";
import { CORDONED_BY_ANNOTATION, cordonAction, uncordonAction } from "../../src/drain/cordon.js";
import {
  EVICTION_RETRY_INITIAL_MS,
  EVICTION_RETRY_JITTER,
  EVICTION_RETRY_MAX_MS,
  evictionRetryDelay,
} from "../../src/drain/retry.js";
import { budgetsFor, statusMessage } from "../../src/drain/pdb.js";
import { pod } from "./drain-fixtures.js";
import {
  EXCLUDE_LB_LABEL,
  LB_EXCLUDED_BY_ANNOTATION,
  exclusion,
} from "../../src/drain/lb-exclusion.js";

const node = (unschedulable: boolean, ours: boolean): V1Node => ({
  metadata: {
    name: "n",
    resourceVersion: "42",
    annotations: ours ? { [CORDONED_BY_ANNOTATION]: "liken" } : {},
  },
  spec: { unschedulable },
});

describe("cordon and uncordon decisions", () => {
  it.each([
    { unschedulable: false, ours: false, cordon: "cordon", uncordon: "not-cordoned" },
    { unschedulable: true, ours: false, cordon: "someone-elses", uncordon: "not-ours" },
    { unschedulable: true, ours: true, cordon: "already-ours", uncordon: "uncordon" },
    { unschedulable: false, ours: true, cordon: "cordon", uncordon: "forget" },
  ])("unschedulable=$unschedulable ours=$ours", ({ unschedulable, ours, cordon, uncordon }) => {
    expect(cordonAction(node(unschedulable, ours)).kind).toBe(cordon);
    expect(uncordonAction(node(unschedulable, ours)).kind).toBe(uncordon);
  });

  it("undoes its load balancer exclusion with its uncordon, and only its own", () => {
    const excluded = (byLiken: boolean): V1Node => {
      const n = node(true, true);
      n.metadata!.labels = { [EXCLUDE_LB_LABEL]: "true" };
      if (byLiken) n.metadata!.annotations![LB_EXCLUDED_BY_ANNOTATION] = "liken";
      return n;
    };
    expect(uncordonAction(excluded(true))).toEqual({
      kind: "uncordon",
      patch: {
        metadata: {
          resourceVersion: "42",
          annotations: { [LB_EXCLUDED_BY_ANNOTATION]: null, [CORDONED_BY_ANNOTATION]: null },
          labels: { [EXCLUDE_LB_LABEL]: null },
        },
        spec: { unschedulable: false },
      },
    });
    const personal = uncordonAction(excluded(false));
    expect(personal.kind === "uncordon" && personal.patch.metadata.labels).toBeUndefined();
    expect(exclusion(excluded(false))).toBeUndefined();
    expect(exclusion(node(false, false))).toEqual({
      labels: { [EXCLUDE_LB_LABEL]: "true" },
      annotations: { [LB_EXCLUDED_BY_ANNOTATION]: "liken" },
    });
  });

  it("marks its cordon and makes the write conditional on what it read", () => {
    expect(cordonAction(node(false, false))).toEqual({
      kind: "cordon",
      patch: {
        metadata: { resourceVersion: "42", annotations: { [CORDONED_BY_ANNOTATION]: "liken" } },
        spec: { unschedulable: true },
      },
    });
    expect(uncordonAction(node(true, true))).toEqual({
      kind: "uncordon",
      patch: {
        metadata: { resourceVersion: "42", annotations: { [CORDONED_BY_ANNOTATION]: null } },
        spec: { unschedulable: false },
      },
    });
  });
});

describe("eviction retry delay", () => {
  it.each([
    { attempt: 1, random: 0.5, want: EVICTION_RETRY_INITIAL_MS },
    { attempt: 2, random: 0.5, want: 2 * EVICTION_RETRY_INITIAL_MS },
    { attempt: 3, random: 0.5, want: 4 * EVICTION_RETRY_INITIAL_MS },
    { attempt: 4, random: 0.5, want: EVICTION_RETRY_MAX_MS },
    { attempt: 50, random: 0.5, want: EVICTION_RETRY_MAX_MS },
    { attempt: 50, random: 0, want: EVICTION_RETRY_MAX_MS * (1 - EVICTION_RETRY_JITTER) },
    { attempt: 50, random: 1, want: EVICTION_RETRY_MAX_MS * (1 + EVICTION_RETRY_JITTER) },
  ])("attempt $attempt, random $random -> $want ms", ({ attempt, random, want }) => {
    expect(evictionRetryDelay(attempt, () => random)).toBe(want);
  });
});

describe("the budget that holds a pod", () => {
  const web = pod({ name: "web-1", ns: "shop", labels: { app: "web" } });
  const pdb = (ns: string, name: string, app?: string) => ({
    metadata: { namespace: ns, name },
    spec: app === undefined ? {} : { selector: { matchLabels: { app } } },
  });
  it("matches by namespace and selector; a budget without a selector matches nothing", () => {
    expect(
      budgetsFor(web, [
        pdb("shop", "web-pdb", "web"),
        pdb("shop", "db-pdb", "db"),
        pdb("other", "web-pdb", "web"),
        pdb("shop", "no-selector"),
      ]),
    ).toEqual(["shop/web-pdb"]);
  });

  it("reads the API server's Status, raw or parsed", () => {
    const body = JSON.stringify({
      kind: "Status",
      message: "Cannot evict pod as it would violate the pod's disruption budget.",
      details: {
        causes: [
          {
            reason: "DisruptionBudget",
            message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
          },
        ],
      },
    });
    expect(statusMessage(body)).toBe(
      "Cannot evict pod as it would violate the pod's disruption budget. (The disruption budget web-pdb needs 2 healthy pods and has 2 currently)",
    );
    expect(statusMessage("not json")).toBe("not json");
  });
});
