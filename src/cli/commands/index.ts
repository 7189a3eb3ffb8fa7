// Every command group of the `liken` CLI, in the order `liken --help` lists them.
// Add one line per group; the group's file holds its options and calls into the modules.
import type { Command } from "commander";
import { registerDrain } from "./drain.js";

export function registerCommands(program: Command): void {
  registerDrain(program);
}
