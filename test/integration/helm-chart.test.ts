// The Helm chart (deploy/helm/liken) against config/ and a real API server: `helm lint`
// passes; with default values `helm template` renders exactly the objects `kubectl kustomize
// config/` does; the API server's dry run accepts the rendered chart; the values change what
// they say. Helm is the pinned v4 from src/controlplane/tools.ts.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { needsTool } from "../support/tool-build.js";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { CHART_DIR, generateChart } from "../../src/deploy/chart.js";
import { kubectl, waitFor } from "../support/kube.js";

const exec = promisify(execFile);
let helmBin = "";

needsTool("helm", (bin) => (helmBin = bin));

async function helm(args: string[]): Promise<string> {
  const r = await exec(helmBin, args, { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 });
  return r.stdout;
}

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}

const key = (o: K8sObject): string =>
  `${o.apiVersion} ${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`;

function objects(stream: string): Map<string, K8sObject> {
  const out = new Map<string, K8sObject>();
  for (const doc of parseAllDocuments(stream)) {
    const o = doc.toJS() as K8sObject | null;
    if (o === null) continue;
    expect(out.has(key(o)), `${key(o)} twice`).toBe(false);
    out.set(key(o), o);
  }
  return out;
}

const template = (...set: string[]): Promise<string> =>
  helm(["template", "liken", CHART_DIR, "--include-crds", ...set.flatMap((s) => ["--set", s])]);

describe("the Helm chart", () => {
  it("carries config/'s files as they are (npm run helm:generate is up to date)", () => {
    expect(generateChart(true)).toEqual([]);
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as {
      version: string;
    };
    const chart = readFileSync(path.join(CHART_DIR, "Chart.yaml"), "utf8");
    expect(chart).toContain(`version: ${pkg.version}\n`);
    expect(chart).toContain(`appVersion: "${pkg.version}"\n`);
  });

  it("passes helm lint", async () => {
    const out = await helm(["lint", CHART_DIR]);
    expect(out).toContain("0 chart(s) failed");
  });

  it("renders with default values exactly what kubectl kustomize config/ does, object by object", async () => {
    const chart = objects(await template());
    const k = await kubectl(["kustomize", path.join(REPO_ROOT, "config")]);
    expect(k.code, k.stderr).toBe(0);
    const config = objects(k.stdout);
    expect([...chart.keys()].sort()).toEqual([...config.keys()].sort());
    for (const [id, o] of config) expect(chart.get(id), id).toEqual(o);
    expect(config.size).toBeGreaterThan(10);
  });

  it("is accepted by the API server's dry run", async () => {
    // The chart's namespaced objects need their namespaces to exist for a dry run (an
    // install creates them first); other tests may have created them already.
    for (const ns of ["liken-system", "liken-heartbeats"]) {
      if ((await kubectl(["get", "namespace", ns])).code !== 0)
        await kubectl(["create", "namespace", ns]);
    }
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], { input: await template() });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /deployment.apps\/cluster-operator (created|configured|unchanged) \(server dry run\)/,
    );
    expect(r.stdout).toMatch(
      /customresourcedefinition.apiextensions.k8s.io\/machines.liken.sh .*\(server dry run\)/,
    );
    expect(r.stdout).toMatch(/validatingadmissionpolicy.* \(server dry run\)/);
  });

  it("takes image, replicas, resources and metrics from values; the ServiceMonitor on request", async () => {
    const all = objects(
      await template(
        "image.repository=registry.example/liken",
        "image.tag=1.2.3",
        "replicas=3",
        "resources.limits.memory=1Gi",
        "heapMiB=640",
        "metrics.port=9100",
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=prom",
      ),
    );
    const d = all.get("apps/v1 Deployment liken-system/cluster-operator") as unknown as {
      spec: {
        replicas: number;
        template: {
          spec: {
            containers: {
              image: string;
              args: string[];
              ports: { containerPort: number }[];
              resources: { limits: { memory: string } };
              env: { name: string; value?: string }[];
            }[];
          };
        };
      };
    };
    expect(d.spec.replicas).toBe(3);
    const c = d.spec.template.spec.containers[0]!;
    expect(c.image).toBe("registry.example/liken:1.2.3");
    expect(c.args).toEqual([
      "operator",
      "--metrics-address=:9100",
      "--webhook-listen=0.0.0.0:9443",
    ]);
    expect(c.ports[0]!.containerPort).toBe(9100);
    expect(c.resources.limits.memory).toBe("1Gi");
    expect(c.env.find((e) => e.name === "NODE_OPTIONS")?.value).toBe("--max-old-space-size=640");
    const sm = all.get("monitoring.coreos.com/v1 ServiceMonitor liken-system/cluster-operator") as
      | { metadata: { labels: Record<string, string> }; spec: { endpoints: { port: string }[] } }
      | undefined;
    expect(sm?.metadata.labels.release).toBe("prom");
    expect(sm?.spec.endpoints[0]!.port).toBe("metrics");

    const proxied = objects(
      await template("proxy.https=http://proxy.corp:3128", "proxy.noProxy=.svc\\,.cluster.local"),
    ).get("apps/v1 Deployment liken-system/cluster-operator") as unknown as {
      spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
    };
    expect(proxied.spec.template.spec.containers[0]!.env.slice(2)).toEqual([
      { name: "HTTPS_PROXY", value: "http://proxy.corp:3128" },
      { name: "NO_PROXY", value: ".svc,.cluster.local" },
    ]);

    // csrApproval=off: the operator approves no machine certificate by itself.
    const manual = objects(await template("csrApproval=off")).get(
      "apps/v1 Deployment liken-system/cluster-operator",
    ) as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(manual.spec.template.spec.containers[0]!.args).toContain("--csr-approval=off");

    // csrNodeLabel: a labelled Node may join by its name (docs/operator.md).
    const labelled = objects(await template("csrNodeLabel=liken.sh/machine")).get(
      "apps/v1 Deployment liken-system/cluster-operator",
    ) as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(labelled.spec.template.spec.containers[0]!.args).toContain(
      "--csr-node-label=liken.sh/machine",
    );

    // metrics.cluster: the cluster label of the metrics that name no Cluster (docs/fleet.md).
    const named = objects(await template("metrics.cluster=store-17")).get(
      "apps/v1 Deployment liken-system/cluster-operator",
    ) as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(named.spec.template.spec.containers[0]!.args).toContain("--metrics-cluster=store-17");
    expect(manual.spec.template.spec.containers[0]!.args.join(" ")).not.toContain(
      "--metrics-cluster",
    );

    const off = objects(await template("metrics.service.enabled=false"));
    expect(off.has("v1 Service liken-system/cluster-operator-metrics")).toBe(false);
    await expect(
      template("metrics.service.enabled=false", "metrics.serviceMonitor.enabled=true"),
    ).rejects.toThrow(/needs metrics.service.enabled/);
  });

  it("renders the alerts and the dashboard on request, as config/monitoring does, and the API server accepts them", async () => {
    const none = objects(await template());
    expect([...none.keys()].filter((k) => /PrometheusRule|ConfigMap/.test(k))).toEqual([]);

    const all = objects(
      await template(
        "monitoring.prometheusRule.enabled=true",
        "monitoring.prometheusRule.labels.release=prom",
        "monitoring.dashboard.enabled=true",
      ),
    );
    const ruleId = "monitoring.coreos.com/v1 PrometheusRule liken-system/liken";
    const dashId = "v1 ConfigMap liken-system/liken-dashboard";
    const rule = all.get(ruleId) as unknown as {
      metadata: { labels: Record<string, string> };
      spec: unknown;
    };
    const dash = all.get(dashId) as unknown as {
      metadata: { labels: Record<string, string> };
      data: Record<string, string>;
    };
    expect(rule.metadata.labels.release).toBe("prom");
    expect(dash.metadata.labels.grafana_dashboard).toBe("1");
    // Byte for byte the dashboard of config/monitoring, and its alerts as written there.
    const source = readFileSync(path.join(REPO_ROOT, "config", "monitoring", "dashboard.json"));
    expect(dash.data["liken.json"]).toBe(source.toString("utf8"));
    const shipped = objects(
      readFileSync(path.join(REPO_ROOT, "config", "monitoring", "prometheus-rule.yaml"), "utf8"),
    ).get(ruleId) as unknown as { spec: unknown };
    expect(rule.spec).toEqual(shipped.spec);

    // The kustomize component renders the same two objects on top of config/.
    const overlay = mkdtempSync(path.join(tmpdir(), "liken-monitoring-overlay-"));
    try {
      writeFileSync(
        path.join(overlay, "kustomization.yaml"),
        [
          "apiVersion: kustomize.config.k8s.io/v1beta1",
          "kind: Kustomization",
          `resources: [${path.relative(overlay, path.join(REPO_ROOT, "config"))}]`,
          `components: [${path.relative(overlay, path.join(REPO_ROOT, "config", "monitoring"))}]`,
          "",
        ].join("\n"),
      );
      const k = await kubectl(["kustomize", overlay]);
      expect(k.code, k.stderr).toBe(0);
      const kz = objects(k.stdout);
      expect((kz.get(ruleId) as unknown as { spec: unknown }).spec).toEqual(rule.spec);
      expect(kz.get(dashId)).toEqual({
        ...dash,
        metadata: { ...dash.metadata, labels: { ...dash.metadata.labels } },
      });
    } finally {
      rmSync(overlay, { recursive: true, force: true });
    }

    // prometheus-operator's CRD, so the API server checks the rule against its schema.
    const crd = path.join(
      REPO_ROOT,
      "test",
      "fixtures",
      "crds",
      "monitoring.coreos.com_prometheusrules.yaml",
    );
    const applied = await kubectl(["apply", "--server-side", "-f", crd]);
    expect(applied.code, applied.stderr).toBe(0);
    await waitFor("the PrometheusRule CRD is established", async () => {
      const r = await kubectl([
        "get",
        "crd",
        "prometheusrules.monitoring.coreos.com",
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Established')].status}",
      ]);
      return r.stdout === "True";
    });
    const docs = ["liken-system"].map(async (ns) => {
      if ((await kubectl(["get", "namespace", ns])).code !== 0)
        await kubectl(["create", "namespace", ns]);
    });
    await Promise.all(docs);
    const rendered = await helm([
      "template",
      "liken",
      CHART_DIR,
      "--show-only",
      "templates/monitoring.yaml",
      "--set",
      "monitoring.prometheusRule.enabled=true",
      "--set",
      "monitoring.dashboard.enabled=true",
    ]);
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], { input: rendered });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/prometheusrule.monitoring.coreos.com\/liken .*\(server dry run\)/);
    expect(r.stdout).toMatch(/configmap\/liken-dashboard .*\(server dry run\)/);
    // The CRD's schema is what judges: a rule with a misspelt field is refused.
    const bad = rendered.replace("expr:", "exprr:");
    const refused = await kubectl(["apply", "--dry-run=server", "--validate=strict", "-f", "-"], {
      input: bad,
    });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/exprr/);
  });
});
