// The `liken` program around a set of commands: version, help on errors, and how a failure is
// printed and turned into an exit code. Shared by the full CLI (main.ts) and the agent's lean
// entry (agent-main.ts). Every failure is one line with a stable code (failure.ts); the stack
// only with LIKEN_DEBUG=1 or `liken --debug ...`.
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { commandPath, debugWanted, describeFailure } from "./failure.js";

export interface CliIo {
  argv: string[];
  stderr: { write(text: string): unknown };
}

/** Builds the program: its own options and settings, then the commands `register` adds. */
export function makeProgram(register: (program: Command) => void): Command {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  const program = new Command("liken")
    .description(
      "Move a fleet of Kubernetes machines to a new OS release: A/B slots, a digest chain, reboot turns.",
    )
    .version(pkg.version, "-v, --version")
    .option("--debug", "on a failure, print the stack too (or set LIKEN_DEBUG=1)")
    // commander's own error line is replaced by ours (one line, a code, the help to read):
    // subcommands inherit this output setting and exitOverride.
    .configureOutput({ outputError: () => undefined })
    .exitOverride();
  register(program);
  return program;
}

export async function runCli(
  register: (program: Command) => void,
  io: CliIo = { argv: process.argv, stderr: process.stderr },
): Promise<void> {
  const program = makeProgram(register);
  const fail = (e: unknown): void => {
    const f = describeFailure(e, commandPath(program, io.argv.slice(2)));
    process.exitCode = f.exitCode;
    if (f.silent) return;
    io.stderr.write(`liken: ${f.message} [${f.code}]\n`);
    if (debugWanted(io.argv) && e instanceof Error && e.stack !== undefined) {
      io.stderr.write(`${e.stack}\n`);
    }
  };
  // A failure outside the awaited chain (a server's error event, a stray rejection) is told
  // the same way, not as Node's default stack dump.
  const late = (e: unknown): void => {
    fail(e);
    process.exit(process.exitCode === 0 ? 1 : process.exitCode);
  };
  process.on("uncaughtException", late);
  process.on("unhandledRejection", late);
  try {
    await program.parseAsync(io.argv);
  } catch (e) {
    fail(e);
  }
}
