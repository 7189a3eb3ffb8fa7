// `liken operator`: runs cluster-operator (the Deployment in config/operator/ runs this).
import { InvalidArgumentError, type Command } from "commander";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { pino } from "pino";
import { collectProcessMetrics } from "../../metrics/process.js";
import type { KubeConfig } from "@kubernetes/client-node";
import { loadKubeConfig, LOST_AFTER_SECONDS, START_GRACE_SECONDS } from "../../api/index.js";
import { MAX_HEARTBEAT_SECONDS, MIN_HEARTBEAT_SECONDS } from "../../agent/config.js";
import { DEFAULT_CHANNEL_INTERVAL_MS } from "../../operator/channel/poll.js";
import { DEFAULT_TURN_DEADLINE_SECONDS } from "../../operator/decide/decide.js";
import { holdFirstTurnWrite } from "../../operator/run/hold.js";
import { Operator } from "../../operator/run/operator.js";
import { CsrApprover } from "../../operator/identity/approver.js";
import { EvictionWebhook, WEBHOOK_CONFIGURATION } from "../../operator/webhook/index.js";
import { parseMetricsAddress, serveMetrics, type ListenAddress } from "../../metrics/serve.js";

/** The Deployment's metrics port (config/operator/, the chart's metrics Service). */
export const DEFAULT_OPERATOR_METRICS_ADDRESS = ":8080";

interface Options {
  kubeconfig?: string;
  identity?: string;
  startGrace: number;
  lostAfter: number;
  turnDeadline: number;
  channelInterval: number;
  endpoint?: string;
  leaderElect: boolean;
  webhookListen?: string;
  webhookUrl?: string;
  metricsAddress: ListenAddress | undefined;
  metricsCluster?: string;
  csrApproval: CsrApproval;
  csrNodeLabel?: string;
}

/** Whether cluster-operator approves machine certificate requests by itself (docs/operator.md). */
type CsrApproval = "auto" | "off";

/** A label key (an optional DNS prefix and a name), with `=value` or not. */
const LABEL =
  /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(=([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?)?$/;

function csrNodeLabel(text: string): string {
  if (LABEL.test(text) && text.split("=")[0]!.length <= 316) return text;
  throw new InvalidArgumentError(
    `--csr-node-label ${text}: give a label as key or key=value (for example liken.sh/machine=true), the label your provisioner puts on the fleet's Nodes`,
  );
}

/** A Prometheus label value that names a cluster: not empty, one line, a Kubernetes name's length. */
function metricsCluster(text: string): string {
  if (text.trim() !== "" && text.length <= 253 && !/[\n\r]/.test(text)) return text;
  throw new InvalidArgumentError(
    `--metrics-cluster ${JSON.stringify(text.slice(0, 80))}: give the cluster's name as the fleet knows it (1 to 253 characters, one line), for example the name of its Cluster`,
  );
}

function csrApproval(text: string): CsrApproval {
  if (text === "auto" || text === "off") return text;
  throw new InvalidArgumentError(
    `--csr-approval ${text}: give auto (approve what a machine files for itself) or off (a person approves every machine certificate)`,
  );
}

/** "90s", "10m", "1h", "500ms", or plain seconds. */
export function parseSeconds(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (m === null)
    throw new InvalidArgumentError(`"${text}" is not a duration (500ms, 40s, 10m, 1h)`);
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  const factor = { ms: 0.001, s: 1, m: 60, h: 3600 }[unit] ?? 1;
  return n * factor;
}

/** Node's timers hold a 32-bit count of milliseconds; a longer delay fires at once. */
const MAX_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/**
 * The bounds of each timing flag, and why. The Lost threshold's floor: agents renew at most
 * every second and at least four times per threshold (src/agent/config.ts), so below 4 s no
 * agent heartbeat leaves room for a missed renewal, and a live machine reads Lost, back, Lost.
 */
export const OPERATOR_TIMING_BOUNDS = {
  "--start-grace": [
    0,
    3600,
    "an hour of no grants after every restart is an outage of the rollout",
  ],
  "--lost-after": [
    4 * MIN_HEARTBEAT_SECONDS,
    3600,
    `a machine is Lost after ${LOST_AFTER_SECONDS} s (the page); agents renew every 1-${MAX_HEARTBEAT_SECONDS} s, at least four times per threshold, and a dead machine must count against the budget within the hour`,
  ],
  "--turn-deadline": [1, MAX_TIMER_SECONDS, "at most Node's timer limit (2^31-1 ms)"],
  "--channel-interval": [1, MAX_TIMER_SECONDS, "at most Node's timer limit (2^31-1 ms)"],
} as const satisfies Record<string, readonly [number, number, string]>;

/** parseSeconds, refused outside the flag's bounds (with what to do). */
export function boundedSeconds(
  flag: keyof typeof OPERATOR_TIMING_BOUNDS,
): (text: string) => number {
  const [min, max, why] = OPERATOR_TIMING_BOUNDS[flag];
  return (text) => {
    const n = parseSeconds(text);
    if (n < min || n > max) {
      throw new InvalidArgumentError(
        `${flag} ${text} is ${n} s; give ${min} s to ${max} s: ${why}`,
      );
    }
    return n;
  };
}

export function registerOperator(program: Command): void {
  program
    .command("operator")
    .description(
      "run cluster-operator: grant reboot turns within each Cluster's budget (one leader at a time), mark silent machines Lost, poll the release channel, keep the Cluster status",
    )
    .option(
      "--kubeconfig <file>",
      "kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster)",
    )
    .option(
      "--identity <name>",
      "this copy's name in grantedBy and Events (default: $POD_NAME or the hostname, plus pid)",
    )
    .option(
      "--start-grace <duration>",
      `grant no turn this long after starting (the page: ${START_GRACE_SECONDS}s; shorten only in tests)`,
      boundedSeconds("--start-grace"),
      START_GRACE_SECONDS,
    )
    .option(
      "--lost-after <duration>",
      `a machine without heartbeat this long reads Lost (the page: ${LOST_AFTER_SECONDS}s; shorten only in tests)`,
      boundedSeconds("--lost-after"),
      LOST_AFTER_SECONDS,
    )
    .option(
      "--turn-deadline <duration>",
      `a machine holding a turn this long without coming back stalls the rollout (in seconds unless a unit is given)`,
      boundedSeconds("--turn-deadline"),
      DEFAULT_TURN_DEADLINE_SECONDS,
    )
    .option(
      "--channel-interval <duration>",
      `read each Cluster's release channel this often (the liken.sh/check-releases annotation asks for a read at once)`,
      boundedSeconds("--channel-interval"),
      DEFAULT_CHANNEL_INTERVAL_MS / 1000,
    )
    .option("--endpoint <url>", "the ENDPOINT column (default: the API server of the kubeconfig)")
    .option(
      "--no-leader-elect",
      "act even without holding the liken-system/cluster-operator Lease (correctness never depends on it)",
    )
    .option(
      "--webhook-listen <host:port>",
      `serve the eviction check (who may evict which pod; the Deployment: 0.0.0.0:9443); without it this copy serves none`,
    )
    .option(
      "--webhook-url <url>",
      `register the eviction check in ValidatingWebhookConfiguration ${WEBHOOK_CONFIGURATION} by this URL instead of the Service (an API server outside the cluster network, e.g. on loopback)`,
    )
    .option(
      "--metrics-address <host:port>",
      "serve Prometheus metrics at http://<host:port>/metrics (docs/metrics.md); :PORT for every interface, port 0 for a free one, off to disable",
      parseMetricsAddress,
      parseMetricsAddress(DEFAULT_OPERATOR_METRICS_ADDRESS),
    )
    .option(
      "--metrics-cluster <name>",
      "the cluster label of the metrics that name no Cluster (liken_operator_leading, the process metrics), so that a Prometheus over many clusters tells them apart (docs/fleet.md); per-Cluster metrics carry their Cluster's name",
      metricsCluster,
    )
    .option(
      "--csr-approval <auto|off>",
      'approve machines\' certificate requests that pass every check (auto), or leave every one for a person (off); refusals are denied or left either way (docs/operator.md, "Machine certificates")',
      csrApproval,
      "auto" as CsrApproval,
    )
    .option(
      "--csr-node-label <key[=value]>",
      'a Node carrying this label is a machine of the fleet and may join by its name with the bootstrap credential; without it, only a name whose Machine was created ahead may (docs/operator.md, "Machine certificates")',
      csrNodeLabel,
    )
    .action(async (o: Options) => {
      const kc = loadKubeConfig(o.kubeconfig);
      const identity =
        o.identity ??
        `${process.env.POD_NAME ?? hostname()}/${process.pid}-${randomBytes(2).toString("hex")}`;
      const log = pino(
        { base: { identity }, timestamp: pino.stdTimeFunctions.isoTime },
        pino.destination(2),
      );
      const endpoint = o.endpoint ?? kc.getCurrentCluster()?.server;
      const hold = holdFirstTurnWrite(process.env, log);
      const op = new Operator(kc, {
        identity,
        startGraceSeconds: o.startGrace,
        lostAfterSeconds: o.lostAfter,
        turnDeadlineSeconds: o.turnDeadline,
        channelIntervalMs: o.channelInterval * 1000,
        ...(endpoint === undefined ? {} : { endpoint }),
        leaderElection: o.leaderElect,
        log,
        ...(hold === undefined ? {} : { beforeTurnWrite: hold }),
      });
      const webhook = evictionWebhook(kc, o, log);
      webhook?.start();
      const approver = new CsrApprover(kc, {
        autoApprove: o.csrApproval === "auto",
        ...(o.csrNodeLabel === undefined ? {} : { nodeLabel: o.csrNodeLabel }),
        leading: () => op.leading(),
        identity,
        log,
      });
      if (o.metricsCluster !== undefined)
        op.metrics.registry.setDefaultLabels({ cluster: o.metricsCluster });
      collectProcessMetrics(op.metrics.registry);
      const metrics =
        o.metricsAddress === undefined
          ? undefined
          : await serveMetrics(op.metrics.registry, o.metricsAddress);
      if (metrics !== undefined) log.info({ url: metrics.url }, "metrics served");
      await op.start();
      approver.start();
      const signal = await new Promise<string>((resolve) => {
        process.once("SIGTERM", () => resolve("SIGTERM"));
        process.once("SIGINT", () => resolve("SIGINT"));
      });
      log.info({ signal }, "stopping");
      await Promise.all([op.stop(), webhook?.stop(), approver.stop()]);
      await metrics?.close();
      log.info({ stats: op.stats }, "cluster-operator stopped");
      log.flush();
    });
}

/** The eviction check this copy serves, if --webhook-listen asks for one. */
function evictionWebhook(
  kc: KubeConfig,
  o: Options,
  log: ConstructorParameters<typeof EvictionWebhook>[1]["log"],
): EvictionWebhook | undefined {
  if (o.webhookUrl !== undefined && o.webhookListen === undefined) {
    throw new InvalidArgumentError("--webhook-url needs --webhook-listen (where to serve it)");
  }
  if (o.webhookListen === undefined) return undefined;
  return new EvictionWebhook(kc, {
    listen: o.webhookListen,
    ...(o.webhookUrl === undefined ? {} : { url: o.webhookUrl }),
    log,
  });
}
