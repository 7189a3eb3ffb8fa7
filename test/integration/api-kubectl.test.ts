// What a person sees with the real kubectl: the listings of the page (normal and wide),
// `kubectl explain`, and `kubectl edit` reopening on a refused spec.version.
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LikenApi, type Cluster, type Machine } from "../../src/api/index.js";
import { createCluster, DIGEST_A } from "../support/clusters.js";
import { kubeConfig, kubectl, uniqueName, waitFor } from "../support/kube.js";

const api = new LikenApi(kubeConfig());
const DIGEST_B = `sha256:${"b".repeat(64)}`;
const created: { kind: "clusters" | "machines"; name: string }[] = [];
const tempDirs: string[] = [];

async function newCluster(name: string): Promise<Cluster> {
  const c = await createCluster(api, name);
  created.push({ kind: "clusters", name });
  return c;
}

afterAll(async () => {
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
  for (const o of created) await api[o.kind].delete(o.name).catch(() => undefined);
});

/**
 * The cells of each line of a kubectl table, cut where the header's columns start (an
 * empty cell stays an empty string, which splitting on whitespace would lose).
 */
function table(stdout: string): string[][] {
  const lines = stdout.trimEnd().split("\n");
  const header = lines[0] ?? "";
  const starts = [...header.matchAll(/\S+/g)].map((m) => m.index);
  return lines.map((line) =>
    starts.map((start, i) => line.slice(start, starts[i + 1] ?? line.length).trim()),
  );
}

describe("kubectl get clusters", () => {
  let name: string;

  beforeAll(async () => {
    name = uniqueName("lab");
    const c = await newCluster(name);
    c.status = {
      phase: "Updating",
      // The STATUS column: the phase, or why a held rollout does not move.
      display: "Updating",
      machines: "4/5",
      version: "2026.10.12-001",
      newest: "2026.10.12-001",
      available: "2026.10.13-001",
      // What the operator writes for AVAILABLE: the channel's newest, marked when it failed here.
      availableText: "2026.10.13-001 (failed on node-2)",
      leaders: ["node-1", "node-2", "node-3"],
      endpoint: "...",
      turns: "node-4",
      rebootTurns: [
        {
          machine: "node-4",
          grantedAt: "2026-12-02T12:00:00Z",
          grantedBy: "cluster-operator-7d9f/1",
          leader: false,
          version: "2026.10.12-001",
        },
      ],
    };
    await api.clusters.replaceStatus(c);
  });

  it("prints the page's columns", async () => {
    const r = await kubectl(["get", "clusters", name]);
    expect(r.stderr).toBe("");
    const [header, row] = table(r.stdout);
    expect(header).toEqual(
      "NAME STATUS MACHINES VERSION NEWEST AVAILABLE LEADERS ENDPOINT AGE".split(" "),
    );
    expect(row?.slice(0, 8)).toEqual([
      name,
      "Updating",
      "4/5",
      "2026.10.12-001",
      "2026.10.12-001",
      "2026.10.13-001 (failed on node-2)",
      '["node-1","node-2","node-3"]',
      "...",
    ]);
    expect(row?.[8]).toMatch(/^\d+s$/);
    expect(row).toHaveLength(9);
  });

  it("-o wide adds TURNS naming the machine that holds a turn, then TRUST and FRESHNESS", async () => {
    const r = await kubectl(["get", "clusters", name, "-o", "wide"]);
    const [header, row] = table(r.stdout);
    // The page's listing, column for column; then LKG, the last known good release, the signed channel's TRUST and FRESHNESS (issue 27,
    // docs/revert.md), and EVIDENCE (docs/rings.md), after the page's last column so the page's columns keep their places.
    expect(header).toEqual(
      "NAME STATUS MACHINES VERSION NEWEST AVAILABLE LEADERS ENDPOINT AGE TURNS LKG TRUST FRESHNESS EVIDENCE".split(
        " ",
      ),
    );
    expect(row?.[9]).toBe("node-4");
  });
});

describe("kubectl get machines", () => {
  it("prints LIKEN and STATUS with role, policy, node and progress; wide adds more", async () => {
    const name = uniqueName("node");
    const m = await api.machines.create({
      apiVersion: "liken.sh/v1alpha1",
      kind: "Machine",
      metadata: { name },
      spec: { cluster: "lab", nodeName: name, role: "Leader", rebootPolicy: "Auto" },
    } satisfies Machine);
    created.push({ kind: "machines", name });
    m.status = {
      version: "2026.10.10-001",
      step: "Downloading",
      target: { version: "2026.10.12-001", digest: DIGEST_B },
      bootedSlot: "a",
      progress: { bytesDone: 37, bytesTotal: 100, percent: 37 },
      lastTrial: {
        version: "2026.10.10-001",
        digest: DIGEST_A,
        slot: "a",
        result: "Succeeded",
        at: "2026-12-01T12:00:00Z",
        reason: "Promoted",
      },
    };
    await api.machines.replaceStatus(m);

    const normal = table((await kubectl(["get", "machines", name])).stdout);
    expect(normal[0]).toEqual(
      "NAME CLUSTER ROLE ROLE-FROM POLICY NODE LIKEN STATUS PROGRESS AGE".split(" "),
    );
    // ROLE-FROM is empty: this Machine was created by a person, not registered by its agent.
    expect(normal[1]?.slice(0, 9)).toEqual([
      name,
      "lab",
      "Leader",
      "",
      "Auto",
      name,
      "2026.10.10-001",
      "Downloading",
      "37",
    ]);

    const wide = table((await kubectl(["get", "machines", name, "-o", "wide"])).stdout);
    expect(wide[0]).toEqual(
      "NAME CLUSTER ROLE ROLE-FROM POLICY NODE LIKEN STATUS PROGRESS AGE TARGET STAGED SLOT HELD-BY APPROVED TRIAL CERT-EXPIRES".split(
        " ",
      ),
    );
    // Nothing staged, not held, nothing approved, no certificate of its own yet: empty cells.
    expect(wide[1]?.slice(10)).toEqual(["2026.10.12-001", "", "a", "", "", "Succeeded", ""]);

    // A certificate that still holds reads as its expiry, not as kubectl's <invalid> for a
    // date column in the future (issue 42, item 3).
    const expiry = new Date(Date.now() + 30 * 86_400_000).toISOString().replace(/\.\d+Z$/, "Z");
    await api.machines.replaceStatus({
      ...(await api.machines.get(name)),
      status: { ...m.status, certificateExpiry: expiry },
    });
    const withCert = table((await kubectl(["get", "machines", name, "-o", "wide"])).stdout);
    expect(withCert[1]?.[16]).toBe(expiry);
  });
});

describe("kubectl explain", () => {
  it("teaches spec.releases.catalog", async () => {
    const r = await waitFor(
      "kubectl explain cluster.spec.releases.catalog (the OpenAPI of the CRD is published)",
      async () => {
        const r = await kubectl(["explain", "cluster.spec.releases.catalog"]);
        return r.code === 0 ? r : undefined;
      },
    );
    const out = r.stdout;
    expect(out).toMatch(/GROUP:\s+liken\.sh/);
    expect(out).toMatch(/KIND:\s+Cluster/);
    expect(out).toMatch(/VERSION:\s+v1alpha1/);
    expect(out).toMatch(/FIELD: catalog <\[\]Object>/);
    expect(out).toContain("The releases this cluster trusts");
    expect(out).toMatch(/digest\s+<string> -required-/);
    expect(out).toMatch(/version\s+<string> -required-/);
    expect(out).toContain("the SHA-256 of the release's");
  });

  it("teaches the health gates", async () => {
    const r = await kubectl(["explain", "cluster.spec.health.pods"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("must be Ready on the machine's node on the trial boot");
    expect(r.stdout).toMatch(/selector\s+<Object> -required-/);
    const top = await kubectl(["explain", "cluster.spec.health"]);
    expect(top.stdout).toContain("HealthCheckFailed");
  });

  it("explains the Machine step words", async () => {
    const r = await kubectl(["explain", "machine.status.step"]);
    expect(r.code).toBe(0);
    for (const w of ["Downloading", "UpdatePending", "RebootPending", "Updating", "Lost"]) {
      expect(r.stdout).toContain(w);
    }
  });
});

describe("kubectl edit cluster", () => {
  /**
   * A scripted editor: each invocation saves what kubectl showed it, then on the first
   * points spec.version at an uncatalogued release and on the second does `second`.
   */
  function editor(second: "fix" | "give-up"): { env: NodeJS.ProcessEnv; dir: string } {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-editor-"));
    tempDirs.push(dir);
    const yamlModule = path.resolve("node_modules/yaml/dist/index.js");
    const script = path.join(dir, "editor.cjs");
    writeFileSync(
      script,
      `#!${process.execPath}
const fs = require("node:fs");
const path = require("node:path");
const YAML = require(${JSON.stringify(yamlModule)});
const file = process.argv[process.argv.length - 1];
const dir = ${JSON.stringify(dir)};
const n = fs.readdirSync(dir).filter((f) => f.startsWith("seen-")).length + 1;
const text = fs.readFileSync(file, "utf8");
fs.writeFileSync(path.join(dir, "seen-" + n + ".yaml"), text);
const doc = YAML.parse(text);
if (n === 1) {
  doc.spec.version = "2026.10.12-001";
  fs.writeFileSync(file, YAML.stringify(doc));
} else if (${JSON.stringify(second)} === "fix") {
  doc.spec.releases.catalog.push({ version: "2026.10.12-001", digest: ${JSON.stringify(DIGEST_B)} });
  fs.writeFileSync(file, YAML.stringify(doc));
} else {
  // Gives up: saves the file as shown, error comments and all.
  fs.writeFileSync(file, text);
}
`,
    );
    chmodSync(script, 0o755);
    // TMPDIR: kubectl keeps a copy of a refused edit there; keep it in the test's folder.
    return { env: { KUBE_EDITOR: script, EDITOR: script, TMPDIR: dir }, dir };
  }

  function seen(dir: string): string[] {
    return readdirSync(dir)
      .filter((f) => f.startsWith("seen-"))
      .sort((a, b) => parseInt(a.slice(5), 10) - parseInt(b.slice(5), 10))
      .map((f) => readFileSync(path.join(dir, f), "utf8"));
  }

  const refusal =
    /# \* spec\.version: Invalid value: spec\.version "2026\.10\.12-001" names no entry in spec\.releases\.catalog: add \{version: "2026\.10\.12-001", digest: sha256:<hex of its release\.yaml>\}/;

  it("reopens with the error; the person adds the catalog entry and the edit lands", async () => {
    const name = uniqueName("lab");
    await newCluster(name);
    const { env, dir } = editor("fix");
    const r = await kubectl(["edit", "cluster", name], { env });
    const views = seen(dir);
    expect(views).toHaveLength(2);
    expect(views[0]).not.toMatch(/names no entry/);
    expect(views[1]).toMatch(refusal);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`cluster.liken.sh/${name} edited`);
    const after = await api.clusters.get(name);
    expect(after.spec.version).toBe("2026.10.12-001");
    expect(after.spec.releases.catalog?.map((e) => e.version)).toEqual([
      "2026.10.10-001",
      "2026.10.12-001",
    ]);
  });

  it("reopens with the error; a person who gives up leaves the Cluster unchanged", async () => {
    const name = uniqueName("lab");
    const before = await newCluster(name);
    const { env, dir } = editor("give-up");
    const r = await kubectl(["edit", "cluster", name], { env });
    const views = seen(dir);
    expect(views).toHaveLength(2);
    expect(views[1]).toMatch(refusal);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("Edit cancelled, no valid changes were saved");
    expect(r.stderr).toContain(`A copy of your changes has been stored to "${dir}/`);
    const after = await api.clusters.get(name);
    expect(after.spec.version).toBe("2026.10.10-001");
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });
});
