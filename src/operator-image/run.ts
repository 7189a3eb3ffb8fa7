// One external command of the image build, as a named phase: its begin and end are logged,
// and a failure names the phase and quotes the tail of the command's own message.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { ImageError } from "./errors.js";

const execFileP = promisify(execFile);

export type Log = (line: string) => void;

export async function phase<T>(name: string, log: Log, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  log(`image: ${name}`);
  const r = await fn();
  log(`image: ${name}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return r;
}

export async function run(
  what: string,
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  try {
    const r = await execFileP(cmd, args, {
      cwd: opts.cwd,
      env: { ...process.env, ...opts.env },
      maxBuffer: 64 * 1024 * 1024,
    });
    return r.stdout;
  } catch (e) {
    const x = e as { code?: number | string; stderr?: string; stdout?: string; message: string };
    const tail = (x.stderr || x.stdout || x.message).trim().split("\n").slice(-6).join(" | ");
    const missing = x.code === "ENOENT";
    throw new ImageError(
      missing ? "LIKEN_IMAGE_TOOL_MISSING" : "LIKEN_IMAGE_STEP_FAILED",
      missing
        ? `${what}: ${cmd} is not installed; run testbed/setup-debian.sh (it installs what the image build needs) and try again`
        : `${what} failed (${cmd} exited ${String(x.code)}): ${tail}; the build left no archive, run it again after fixing the cause`,
      { cause: e, context: { cmd, args } },
    );
  }
}
