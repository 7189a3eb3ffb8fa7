// How the project's npm-script programs (cluster, tools, image) end: a liken error prints its
// message and code and exits 1; commander's own exits (help, a usage error it already
// printed) keep their exit code; anything else is a bug and throws with its stack.
import type { Command } from "commander";
import { LikenError } from "../errors.js";

export async function runProgram(program: Command, argv: string[] = process.argv): Promise<void> {
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof LikenError) {
      process.stderr.write(`liken: ${e.message} [${e.code}]\n`);
      process.exitCode = 1;
    } else if ((e as { code?: string }).code?.startsWith("commander.")) {
      process.exitCode = (e as { exitCode?: number }).exitCode ?? 1;
    } else {
      throw e;
    }
  }
}
