// A real Prometheus server for tests: the pinned build (src/controlplane/tools.ts) on a free
// loopback port, with a config the test writes, its TSDB in a temporary directory, and the
// HTTP API's answers typed. Targets can come from a file (file_sd) that the test rewrites as
// processes come and go: Prometheus notices the rename and scrapes the new list.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, open, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { freePort } from "../../src/controlplane/ports.js";
import { ensureTool } from "../../src/controlplane/tools.js";
import { waitFor } from "./kube.js";

export interface PromSeries {
  metric: Record<string, string>;
}

export interface PromAlert {
  labels: Record<string, string>;
  state: "pending" | "firing" | "inactive";
  activeAt?: string;
}

export interface PrometheusOptions {
  /** The rules file's text (groups:). */
  rules: string;
  /** job -> static targets (host:port). */
  staticTargets: Record<string, string[]>;
  /** Jobs whose targets come from a file the test rewrites with setTargets(). */
  fileJobs: string[];
  /** Scrape and rule evaluation interval; 1 s so a short test sees several of each. */
  interval?: string;
}

export class PrometheusServer {
  private constructor(
    readonly url: string,
    private readonly dir: string,
    private readonly child: ChildProcess,
    private readonly exited: Promise<void>,
    readonly logFile: string,
  ) {}

  static async start(o: PrometheusOptions): Promise<PrometheusServer> {
    const bin = await ensureTool("prometheus");
    const dir = await mkdtemp(path.join(tmpdir(), "liken-prometheus-"));
    const interval = o.interval ?? "1s";
    await writeFile(path.join(dir, "rules.yaml"), o.rules);
    for (const job of o.fileJobs) await writeFile(path.join(dir, `${job}.targets.yaml`), "[]\n");
    const config = {
      global: {
        scrape_interval: interval,
        evaluation_interval: interval,
        scrape_timeout: interval,
      },
      rule_files: ["rules.yaml"],
      scrape_configs: [
        ...Object.entries(o.staticTargets).map(([job, targets]) => ({
          job_name: job,
          static_configs: [{ targets }],
        })),
        ...o.fileJobs.map((job) => ({
          job_name: job,
          file_sd_configs: [
            { files: [path.join(dir, `${job}.targets.yaml`)], refresh_interval: "1s" },
          ],
        })),
      ],
    };
    await writeFile(path.join(dir, "prometheus.yaml"), stringify(config));
    const port = await freePort();
    const logFile = path.join(dir, "prometheus.log");
    const log = await open(logFile, "w");
    const child = spawn(
      bin,
      [
        `--config.file=${path.join(dir, "prometheus.yaml")}`,
        `--storage.tsdb.path=${path.join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { cwd: dir, stdio: ["ignore", log.fd, log.fd] },
    );
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    void exited.then(() => log.close());
    const url = `http://127.0.0.1:${port}`;
    const server = new PrometheusServer(url, dir, child, exited, logFile);
    await waitFor(
      `Prometheus on ${url} to be ready (its log: ${logFile})`,
      async () => {
        if (child.exitCode !== null)
          throw new Error(`Prometheus exited ${child.exitCode}; see ${logFile}`);
        return (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok === true;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    return server;
  }

  /** Replaces a file job's targets (written whole, then renamed: never a half file). */
  async setTargets(job: string, targets: string[]): Promise<void> {
    const file = path.join(this.dir, `${job}.targets.yaml`);
    await writeFile(`${file}.tmp`, stringify([{ targets }]));
    await rename(`${file}.tmp`, file);
  }

  private async api<T>(p: string, params: Record<string, string> = {}): Promise<T> {
    const res = await fetch(`${this.url}/api/v1/${p}?${new URLSearchParams(params).toString()}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== "success")
      throw new Error(`Prometheus ${p} ${JSON.stringify(params)}: ${body.error}`);
    return body.data;
  }

  /** The series a query returned over [start, end] (seconds), one evaluation per `step`. */
  async queryRange(expr: string, start: number, end: number, step = "1s"): Promise<PromSeries[]> {
    const d = await this.api<{ result: PromSeries[] }>("query_range", {
      query: expr,
      start: String(start),
      end: String(end),
      step,
    });
    return d.result;
  }

  async alerts(): Promise<PromAlert[]> {
    return (await this.api<{ alerts: PromAlert[] }>("alerts")).alerts;
  }

  /** Each target's job, health and last error, for a failure message. */
  async targets(): Promise<{ job: string; url: string; health: string; lastError: string }[]> {
    const d = await this.api<{
      activeTargets: {
        labels: Record<string, string>;
        scrapeUrl: string;
        health: string;
        lastError: string;
      }[];
    }>("targets");
    return d.activeTargets.map((t) => ({
      job: t.labels.job ?? "",
      url: t.scrapeUrl,
      health: t.health,
      lastError: t.lastError,
    }));
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill("SIGTERM");
      const ended = await Promise.race([
        this.exited.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 10_000).unref()),
      ]);
      if (!ended) this.child.kill("SIGKILL");
      await this.exited;
    }
    if (process.env.LIKEN_KEEP_TEST_DIRS === undefined)
      await rm(this.dir, { recursive: true, force: true });
  }
}
