// `liken agent run --config F`: the daemon. Wiring only: load the config, make the logger,
// run the loop, turn SIGTERM/SIGINT into a safe stop (finish or abandon the current step).
import type { Command } from "commander";
import { pino } from "pino";
import { loadConfig } from "../../agent/config.js";
import { AgentDaemon } from "../../agent/daemon.js";
import { DEFAULT_CONFIG } from "../../slots/config.js";
import { likenEntry } from "../entry.js";

export function addAgentRunCommand(agent: Command): void {
  agent
    .command("run")
    .description(
      "Run the agent daemon: download, stage, take a reboot turn, trial, promote or fall back",
    )
    .option("--config <file>", "agent config (docs/agent.md)", DEFAULT_CONFIG)
    .action(async (o: { config: string }) => {
      const cfg = await loadConfig(o.config);
      const log = pino({
        base: { machine: cfg.machine },
        level: process.env.LIKEN_LOG_LEVEL ?? "info",
      });
      const daemon = new AgentDaemon(cfg, log, { entry: likenEntry() });
      const stop = (sig: string): void => {
        log.info({ signal: sig }, "stopping");
        daemon.stop();
      };
      process.once("SIGTERM", () => stop("SIGTERM"));
      process.once("SIGINT", () => stop("SIGINT"));
      await daemon.run();
      log.info("stopped");
    });
}
