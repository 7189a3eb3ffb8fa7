// `liken agent run --config F`: the daemon. Wiring only: load the config, make the logger,
// run the loop, turn SIGTERM/SIGINT into a safe stop (finish or abandon the current step).
// The daemon is imported by the action, so `liken agent download` (the daemon's own download
// child, run by the same CLI) never loads it.
import type { Command } from "commander";
import { parseMetricsAddress, type ListenAddress } from "../../metrics/serve.js";
import { DEFAULT_CONFIG } from "../../slots/config.js";
import { likenEntry } from "../entry.js";

export function addAgentRunCommand(agent: Command): void {
  agent
    .command("run")
    .description(
      "Run the agent daemon: download, stage, take a reboot turn, trial, promote or fall back",
    )
    .option("--config <file>", "agent config (docs/agent.md)", DEFAULT_CONFIG)
    .option(
      "--metrics-address <host:port>",
      "serve Prometheus metrics at http://<host:port>/metrics (overrides the config's metricsAddress; default off)",
      parseMetricsAddress,
    )
    .action(async (o: { config: string; metricsAddress?: ListenAddress }) => {
      const { pino } = await import("pino");
      const { loadConfig } = await import("../../agent/config.js");
      const { AgentDaemon } = await import("../../agent/daemon.js");
      const cfg = await loadConfig(o.config);
      const log = pino({
        base: { machine: cfg.machine },
        level: process.env.LIKEN_LOG_LEVEL ?? "info",
      });
      // prom-client is loaded only when metrics are asked for (the idle agent's memory).
      const at = o.metricsAddress ?? cfg.metricsAddress;
      const meter =
        at === undefined ? undefined : (await import("../../agent/metrics.js")).agentMetrics;
      const metrics =
        meter === undefined
          ? undefined
          : await (await import("../../metrics/serve.js")).serveMetrics(meter.registry, at!);
      if (metrics !== undefined) log.info({ url: metrics.url }, "metrics served");
      // The machine's own certificate first (docs/machine.md, "Identity"): the daemon's API
      // client is built from the kubeconfig it writes.
      const joining = new AbortController();
      let daemon: { stop(): void } = { stop: () => joining.abort() };
      const stop = (sig: string): void => {
        log.info({ signal: sig }, "stopping");
        daemon.stop();
      };
      process.once("SIGTERM", () => stop("SIGTERM"));
      process.once("SIGINT", () => stop("SIGINT"));
      let identity: import("../../agent/identity/identity.js").MachineIdentity | undefined;
      if (cfg.identity !== undefined) {
        const { MachineIdentity } = await import("../../agent/identity/identity.js");
        identity = new MachineIdentity(cfg.machine, cfg.identity, log);
        await identity.ensure(joining.signal).catch((e: unknown) => {
          if (!joining.signal.aborted) throw e;
        });
        if (joining.signal.aborted) return void log.info("stopped before the machine joined");
      }
      const running = new AgentDaemon(cfg, log, {
        entry: likenEntry(),
        ...(meter === undefined ? {} : { meter }),
        ...(identity === undefined ? {} : { identity }),
      });
      daemon = running;
      await running.run();
      await metrics?.close();
      log.info("stopped");
    });
}
