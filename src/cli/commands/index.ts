// Every command group of the `liken` CLI, in the order `liken --help` lists them.
// Add one line per group; the group's file holds its options and calls into the modules.
import type { Command } from "commander";
import { registerAgent } from "./agent.js";
import { registerChannel } from "./channel.js";
import { registerRelease } from "./release.js";
import { registerDrain } from "./drain.js";
import { registerStatus } from "./status.js";

export function registerCommands(program: Command): void {
  registerRelease(program);
  registerChannel(program);
  registerAgent(program);
  registerStatus(program);
  registerDrain(program);
}
