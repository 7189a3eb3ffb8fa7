// Every command group of the `liken` CLI, in the order `liken --help` lists them.
// Add one line per group; the group's file holds its options and calls into the modules.
import type { Command } from "commander";
import { registerAgent } from "./agent.js";
import { addAgentRunCommand } from "./agent-run.js";
import { registerChannel } from "./channel.js";
import { registerRelease } from "./release.js";
import { registerDrain } from "./drain.js";
import { registerOperator } from "./operator.js";
import { registerApprove } from "./approve.js";
import { registerRollout } from "./rollout.js";
import { registerStatus } from "./status.js";
import { registerMachine } from "./machine.js";
import { registerCheckInstall } from "./check-install.js";
import { registerPromote } from "./promote.js";
import { registerFleet } from "./fleet.js";

export function registerCommands(program: Command): void {
  registerRelease(program);
  registerChannel(program);
  registerPromote(program);
  addAgentRunCommand(registerAgent(program));
  registerStatus(program);
  registerDrain(program);
  registerOperator(program);
  registerApprove(program);
  registerRollout(program);
  registerFleet(program);
  registerMachine(program);
  registerCheckInstall(program);
}
