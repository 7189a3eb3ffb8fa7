// The operator image, run as its Deployment runs it: `npm run image`'s archive, unpacked by
// umoci and started by runc (both built from the Go module proxy) against the real control
// plane, authenticated only by a ServiceAccount token from the TokenRequest API mounted where
// a pod has it, with the RBAC of config/. The test plays one Machine; the operator in the
// container grants it a turn; its /metrics exposition must pass `promtool check metrics`.
import { execFile, spawn } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { ensureTool } from "../../src/controlplane/tools.js";
import { buildImage, IMAGE_UID, type BuiltImage } from "../../src/operator-image/build.js";
import { operatorImage } from "../../src/operator-image/reference.js";
import {
  Fleet,
  Heartbeats,
  createCluster,
  createMachine,
  deleteAll,
  ensureNamespaces,
  stagedStatus,
  writeStatus,
} from "../integration/operator-fleet.js";
import {
  SERVICE_ACCOUNT_DIR,
  containerId,
  podSpec,
  runContainer,
  scratchDir,
  sweepContainers,
  sweepScratch,
  unpackImage,
  type Container,
} from "../support/container.js";
import { controlPlane, kubeConfig, kubectl, uniqueName, waitFor } from "../support/kube.js";
import { metricsUrlIn, parseExposition, total } from "../support/metrics.js";

const exec = promisify(execFile);
const log = (l: string): void => void process.stderr.write(`${l}\n`);

sweepScratch("liken-image");
const work = scratchDir("liken-image");
/** runc's state, in one place for every run, so a run sweeps what a killed one left. */
const RUNC_STATE = path.join(REPO_ROOT, ".lab", "runc");
let image: BuiltImage;
let tools: { runc: string; umoci: string; promtool: string };

interface DeployedContainer {
  args: string[];
  /** Its env entries with a literal value (POD_NAME comes from the downward API). */
  env: Record<string, string>;
}

/** The cluster-operator container of config/operator/deployment.yaml: its args and env. */
function deployedContainer(): DeployedContainer {
  const text = readFileSync(path.join(REPO_ROOT, "config", "operator", "deployment.yaml"), "utf8");
  for (const doc of parseAllDocuments(text)) {
    const o = doc.toJS() as {
      kind?: string;
      spec?: {
        template?: {
          spec?: {
            containers?: {
              name: string;
              args?: string[];
              env?: { name: string; value?: string }[];
            }[];
          };
        };
      };
    } | null;
    if (o?.kind !== "Deployment") continue;
    const c = o.spec?.template?.spec?.containers?.find((x) => x.name === "cluster-operator");
    if (c?.args) {
      const env = (c.env ?? []).filter((e) => e.value !== undefined);
      return { args: c.args, env: Object.fromEntries(env.map((e) => [e.name, e.value!])) };
    }
  }
  throw new Error("config/operator/deployment.yaml: no cluster-operator container with args");
}

/** `promtool check metrics` on an exposition: its exit code and what it said. */
async function promtoolCheck(
  promtool: string,
  body: string,
): Promise<{ code: number; out: string }> {
  const child = spawn(promtool, ["check", "metrics"], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr.on("data", (b: Buffer) => (out += b.toString()));
  child.stdin.end(body);
  const code = await new Promise<number>((r) => child.on("close", (c) => r(c ?? 1)));
  return { code, out };
}

/** What the kubelet mounts for a pod: a bound token of the ServiceAccount, the CA, the namespace. */
async function serviceAccountVolume(dir: string): Promise<void> {
  const core = kubeConfig().makeApiClient(CoreV1Api);
  const tr = await core.createNamespacedServiceAccountToken({
    name: "cluster-operator",
    namespace: "liken-system",
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "token"), tr.status!.token);
  copyFileSync(controlPlane().serverCaCert, path.join(dir, "ca.crt"));
  writeFileSync(path.join(dir, "namespace"), "liken-system");
  // The container runs as IMAGE_UID: it must read them, as a projected volume's 0644 allows.
  for (const f of ["token", "ca.crt", "namespace"]) chmodSync(path.join(dir, f), 0o644);
  chmodSync(dir, 0o755);
  chmodSync(work, 0o755);
}

describe("the operator image under runc", () => {
  let container: Container | undefined;
  const cluster = uniqueName("img");
  const machine = uniqueName("img-m");
  const heartbeats = new Heartbeats(cluster, [machine]);

  beforeAll(async () => {
    // Cold, these build umoci, runc and promtool from the Go module proxy (minutes).
    tools = {
      umoci: await ensureTool("umoci", log),
      runc: await ensureTool("runc", log),
      promtool: await ensureTool("promtool", log),
    };
    await sweepContainers(tools.runc, RUNC_STATE, log);
    image = await buildImage(log, { out: path.join(work, "out") });
    await ensureNamespaces();
    const rbac = await kubectl([
      "apply",
      "--server-side",
      "-f",
      path.join(REPO_ROOT, "config", "rbac", "namespaces.yaml"),
      "-f",
      path.join(REPO_ROOT, "config", "rbac", "cluster-operator.yaml"),
    ]);
    expect(rbac.stderr).toBe("");
  });

  afterAll(async () => {
    heartbeats.stop();
    await container?.stop();
    await deleteAll(cluster, [machine]);
    rmSync(work, { recursive: true, force: true });
  });

  it("grants a turn to a Machine with only its ServiceAccount, as a non-root user, and serves metrics promtool accepts", async () => {
    const ref = operatorImage(REPO_ROOT);
    expect(image.ref).toBe(ref.ref);
    const sa = path.join(work, "serviceaccount");
    await serviceAccountVolume(sa);
    const bundle = await unpackImage(
      tools.umoci,
      image.archive,
      ref.tag,
      path.join(work, "unpacked"),
    );
    const server = new URL(controlPlane().server);
    const podName = containerId("cluster-operator");
    const deployed = deployedContainer();
    const spec = podSpec(bundle, {
      // The Deployment's args and env (its heap cap), with the 40 s start-up grace shortened
      // for a test, and the metrics on a free loopback port: the container shares this
      // machine's network.
      args: [...deployed.args, "--start-grace", "2s", "--metrics-address", "127.0.0.1:0"],
      env: {
        ...deployed.env,
        POD_NAME: podName,
        KUBERNETES_SERVICE_HOST: server.hostname,
        KUBERNETES_SERVICE_PORT: server.port,
      },
      serviceAccountDir: sa,
    });
    expect(spec.process.args[0]).toBe("liken");
    expect(spec.process.user.uid).toBe(IMAGE_UID);
    expect(spec.mounts.some((m) => m.destination === SERVICE_ACCOUNT_DIR)).toBe(true);

    container = runContainer(tools.runc, RUNC_STATE, podName, bundle);
    const running = container;
    onTestFailed(() => log(`operator container log:\n${running.log()}`));

    // The process in the container is the operator, and not root.
    const state = await waitFor(
      "the container to run",
      async () => {
        const r = await exec(tools.runc, ["--root", RUNC_STATE, "state", podName]);
        const s = JSON.parse(r.stdout) as { status: string; pid: number };
        return s.status === "running" ? s : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${state.pid}/status`, "utf8"))?.[1];
    expect(Number(uid)).toBe(IMAGE_UID);

    await createCluster(cluster);
    await createMachine(cluster, { name: machine });
    await heartbeats.start();
    const fleet = new Fleet(cluster, [{ name: machine }], { heartbeats });
    await fleet.start();
    try {
      await writeStatus(machine, stagedStatus());
      await waitFor(
        `the operator in the container to grant ${machine} its turn and see it back`,
        async () => fleet.finished.has(machine),
        { timeoutMs: 90_000, intervalMs: 250 },
      );
    } finally {
      await fleet.stop();
    }
    // Every API answer arrived whole: Debian's Node with node-fetch unrepaired reads each
    // complete chunked answer as cut short (src/operator-image/bundle.ts).
    expect(container.log()).not.toContain("Premature close");
    expect(fleet.violations).toEqual([]);
    expect([...fleet.grantors].every((g) => g.startsWith(`${podName}/`))).toBe(true);
    expect(fleet.grantsSeen).toEqual([machine]);

    const url = await waitFor("the operator to log its metrics URL", async () =>
      metricsUrlIn(container!.log()),
    );
    const res = await fetch(url);
    expect(res.status).toBe(200);
    const body = await res.text();
    const check = await promtoolCheck(tools.promtool, body);
    expect(check, `promtool check metrics said: ${check.out}`).toEqual({ code: 0, out: "" });
    const families = body.split("\n").filter((l) => l.startsWith("# TYPE ")).length;
    log(`metric families: ${families}`);
    expect(families).toBeGreaterThan(0);
    // The grant the test saw is the one the metrics count.
    expect(total(parseExposition(body), "liken_operator_turns_granted_total", { cluster })).toBe(1);
  });
});
