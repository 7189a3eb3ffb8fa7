// Machines that start with the bootstrap credential alone, on the real control plane whose
// signer issues 90 s certificates (TEST_SIGNING_DURATION_SECONDS): each agent joins for a
// certificate of its own (approved by the real `liken operator`), then renews it at 70-90 %
// of each lifetime while a rollout runs. Every machine must renew at least twice during the
// rollout, never lose a heartbeat long enough to read Lost, never be refused by the API
// server (no 401 on a request, a watch or a heartbeat), and finish the rollout. A third
// machine, in a Cluster of its own (a machine off in the rollout's Cluster would hold its
// disruption budget), joins with the others and is powered off at once: its certificate
// expires while the rollout runs, and it is powered on after it to join again with the
// bootstrap credential (its wait for the expiry overlaps the rollout's two renewals instead
// of following them).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HEARTBEAT_NAMESPACE,
  LOST_AFTER_SECONDS,
  type Machine,
  type ReleaseRef,
} from "../../src/api/types.js";
import { bootstrapToken, installIdentityRbac } from "../support/identity.js";
import { kubeConfig, kubectl, waitFor } from "../support/kube.js";
import { Fleet } from "./agent-harness.js";

const suffix = Date.now().toString(36);
const L1 = `rot-l1-${suffix}`;
const W1 = `rot-w1-${suffix}`;
const NAMES = [L1, W1];
/** Powered off right after it joined, on until the last test: it rejoins after its expiry. */
const OFF = `rot-off-${suffix}`;

function runs(r: ReleaseRef) {
  return (m: Machine): boolean => m.status?.step === "Ready" && m.status.version === r.version;
}

describe("machine certificates rotate during a rollout", () => {
  const fleet = new Fleet();
  /** OFF's Cluster: the same control plane and operator, no rollout. */
  const away = new Fleet();
  let offSince = 0;
  let offExpiry = 0;
  let v1: ReleaseRef, v2: ReleaseRef;
  const renewals = new Map<string, number[]>();
  let leaseTimer: NodeJS.Timeout | undefined;
  const leaseErrors: string[] = [];

  beforeAll(async () => {
    await installIdentityRbac();
    const admission = fileURLToPath(new URL("../../config/admission/", import.meta.url));
    expect((await kubectl(["apply", "-f", admission])).code).toBe(0);
    const { kubeconfig: bootstrap } = await bootstrapToken();
    await fleet.start(["2026.10.10-001", "2026.10.12-001"]);
    [v1, v2] = fleet.releases as [ReleaseRef, ReleaseRef];
    for (const [name, role] of [
      [L1, "Leader"],
      [W1, "Worker"],
    ] as const) {
      await fleet.addMachine({ name, role, rebootPolicy: "Auto" }, {}, undefined, bootstrap);
    }
    await away.start(["2026.10.10-001"]);
    await away.addMachine(
      { name: OFF, role: "Worker", rebootPolicy: "Auto" },
      {},
      undefined,
      bootstrap,
    );
    // One cluster-operator for the control plane: it reconciles both Clusters and approves
    // every machine's request.
    await fleet.startRealOperator();
    fleet.powerOnAll();
    away.powerOnAll();
    await fleet.waitAll(
      "every machine joined and reports Ready on the first release",
      runs(v1),
      240_000,
    );
    await away.waitAll(`${OFF} joined and reports Ready`, runs(away.releases[0]!), 240_000);
    await away.machines.get(OFF)!.stop();
    offSince = Date.now();
    offExpiry = Date.parse((await away.api.machines.get(OFF)).status!.certificateExpiry!);
    // Every renewal of each heartbeat Lease, as the API server holds it.
    const leases = kubeConfig().makeApiClient(CoordinationV1Api);
    leaseTimer = setInterval(() => {
      for (const name of NAMES) {
        void leases
          .readNamespacedLease({ name, namespace: HEARTBEAT_NAMESPACE })
          .then((l) => {
            // A MicroTime: client-node 1.x hands it over as text or as a Date, by version.
            const r = l.spec?.renewTime as Date | string | undefined;
            const t = r === undefined ? undefined : new Date(r).getTime();
            const seen = renewals.get(name) ?? [];
            if (t !== undefined && seen.at(-1) !== t) renewals.set(name, [...seen, t]);
          })
          .catch((e: unknown) => leaseErrors.push(String(e)));
      }
    }, 1000);
  }, 400_000);
  afterAll(async () => {
    clearInterval(leaseTimer);
    await fleet.stop();
    await away.stop();
  }, 60_000);

  it("each machine starts from the bootstrap credential and holds a certificate of its own", async () => {
    for (const name of NAMES) {
      const m = await fleet.api.machines.get(name);
      expect(m.status?.certificateExpiry).toBeDefined();
      expect(m.status?.conditions).toContainEqual(
        expect.objectContaining({ type: "IdentityCurrent", status: "True" }),
      );
      const sim = fleet.machines.get(name)!;
      const own = readFileSync(sim.identityKubeconfig, "utf8");
      expect(own).toContain("liken-client-current.pem");
      expect(own).not.toMatch(/token/);
    }
  });

  it("renews every certificate at least twice during a rollout, with no 401, no Lost and no silent heartbeat", async () => {
    const began = Date.now();
    await fleet.setTarget(v2);
    const expiries = (name: string): string[] => [
      ...new Set(
        fleet
          .machineHistory(name)
          .filter((h) => h.at >= began)
          .map((h) => (h.object as Machine).status?.certificateExpiry)
          .filter((e): e is string => e !== undefined),
      ),
    ];
    await waitFor(
      "every machine runs the new release and reported two renewed certificates",
      async () => {
        const ms = await Promise.all(NAMES.map((n) => fleet.api.machines.get(n)));
        return ms.every(runs(v2)) && NAMES.every((n) => expiries(n).length >= 3);
      },
      { timeoutMs: 420_000, intervalMs: 1000 },
    );
    for (const name of NAMES) {
      const history = fleet.machineHistory(name);
      expect(
        history.filter((h) => h.step === "Lost"),
        `${name} read Lost`,
      ).toEqual([]);
      const renewed = history.some((h) =>
        (h.object as Machine).status?.conditions?.some(
          (c) => c.type === "IdentityCurrent" && c.reason === "Renewed",
        ),
      );
      expect(renewed, `${name} said Renewed`).toBe(true);
      // A Lease renewed at least every LOST_AFTER_SECONDS, reboots included.
      const times = renewals.get(name) ?? [];
      expect(
        times.length,
        `Lease renewals seen (read errors: ${leaseErrors.slice(-3).join("; ")})`,
      ).toBeGreaterThan(10);
      const gaps = times.slice(1).map((t, i) => t - times[i]!);
      expect(Math.max(...gaps), `${name}'s longest heartbeat gap (ms)`).toBeLessThan(
        LOST_AFTER_SECONDS * 1000,
      );
      // No request, watch or heartbeat of the agent was refused for its credentials.
      const log = readFileSync(fleet.machines.get(name)!.logFile, "utf8");
      expect(log).not.toMatch(/LIKEN_API_UNAUTHORIZED/);
      expect(log).not.toMatch(/watch refused/);
      const renewedLines = log.split("\n").filter((l) => l.includes('"msg":"renewed"'));
      expect(renewedLines.length, `${name} renewals in its log`).toBeGreaterThanOrEqual(2);
    }
  }, 480_000);

  it("a machine powered off past its certificate's expiry joins again with the bootstrap credential, and says so", async () => {
    const sim = away.machines.get(OFF)!;
    // It was off before its certificate expired, and stays off until past it.
    expect(offSince, `${OFF} powered off before its certificate's expiry`).toBeLessThan(offExpiry);
    await waitFor(
      "the stopped machine's certificate to expire",
      async () => Date.now() > offExpiry + 2000,
      {
        timeoutMs: 180_000,
        intervalMs: 1000,
      },
    );
    sim.powerOn();
    await waitFor(
      `${OFF} back with a new certificate from the bootstrap credential (IdentityCurrent Rejoined)`,
      async () => {
        const m = await away.api.machines.get(OFF);
        const c = m.status?.conditions?.find((x) => x.type === "IdentityCurrent");
        return (
          c?.status === "True" &&
          c.reason === "Rejoined" &&
          Date.parse(m.status!.certificateExpiry!) > Date.now() &&
          m.status?.step === "Ready"
        );
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    const log = readFileSync(sim.logFile, "utf8");
    expect(log).toMatch(
      /the client certificate expired: joining again with the bootstrap credential/,
    );
  }, 360_000);
});
