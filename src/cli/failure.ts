// How a failed `liken` command is told to the person who ran it: one line naming what was
// wrong and what to do, ending in a stable code, and never a stack trace (the stack is for
// the developer of liken: LIKEN_DEBUG=1 or `liken --debug ...` adds it).
//
// A LikenError already says all that. The rest comes from below liken's own code (Node's
// file system, the URL parser, the network, a library) and is mapped here, at the edge, into
// the same shape, so every command gets it without each one wrapping its own calls.
import { CommanderError } from "commander";
import { isLikenError } from "../errors.js";

/** The stable codes of failures the CLI maps itself (docs/errors.md would list them). */
export const CLI_FAILURE_CODES = {
  /** commander refused the command line: unknown option, missing argument, bad value. */
  usage: "LIKEN_CLI_USAGE",
  fileNotFound: "LIKEN_CLI_FILE_NOT_FOUND",
  fileAccess: "LIKEN_CLI_FILE_ACCESS",
  file: "LIKEN_CLI_FILE",
  badUrl: "LIKEN_CLI_BAD_URL",
  unreachable: "LIKEN_CLI_UNREACHABLE",
  port: "LIKEN_CLI_PORT",
  /** Nothing above: a bug in liken or a library; the message says how to get the stack. */
  unexpected: "LIKEN_CLI_UNEXPECTED",
} as const;

export interface Failure {
  /** The line to print, without the "liken: " prefix and without the code. */
  message: string;
  code: string;
  /** For a CommanderError: the exit code commander chose (0 for --help and --version). */
  exitCode: number;
  /** Nothing to print: commander already printed help or a version. */
  silent: boolean;
}

const FILE_WHAT: Record<string, string> = {
  ENOENT: "does not exist",
  EACCES: "is not readable or writable by this user",
  EPERM: "is not permitted to this user",
  EISDIR: "is a directory, not a file",
  ENOTDIR: "has a part that is not a directory",
  EEXIST: "already exists",
  ENOSPC: "is on a full file system",
  EROFS: "is on a read-only file system",
};

const NET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
]);

interface NodeErrorLike {
  code?: unknown;
  path?: unknown;
  syscall?: unknown;
  address?: unknown;
  port?: unknown;
  input?: unknown;
  hostname?: unknown;
  message?: unknown;
  cause?: unknown;
}

/** The error and its causes, outermost first (fetch wraps the socket's error in `cause`). */
function chain(e: unknown): NodeErrorLike[] {
  const out: NodeErrorLike[] = [];
  let cur: unknown = e;
  while (cur !== null && typeof cur === "object" && out.length < 8) {
    out.push(cur as NodeErrorLike);
    cur = (cur as NodeErrorLike).cause;
  }
  return out;
}

const firstLine = (text: string): string => text.split("\n")[0]!.trim();

const plain = (message: string, code: string): Failure => ({
  message,
  code,
  exitCode: 1,
  silent: false,
});

function commanderFailure(e: CommanderError, command: string): Failure {
  const silent = e.code === "commander.helpDisplayed" || e.code === "commander.version";
  // commander.help (a group run without its subcommand) printed the help: say so in one line.
  const text =
    e.code === "commander.help" || e.code === "commander.executeSubCommandAsync"
      ? `${command || "liken"} needs a subcommand`
      : firstLine(e.message).replace(/^error: /, "");
  return {
    message: `${text}; see: liken ${command ? `${command} ` : ""}--help`,
    code: CLI_FAILURE_CODES.usage,
    exitCode: e.exitCode,
    silent: silent || e.exitCode === 0,
  };
}

/** A URL or a port that Node refused. */
function inputFailure(c: NodeErrorLike, code: string): Failure | undefined {
  if (code === "ERR_INVALID_URL") {
    return plain(
      `${JSON.stringify(String(c.input ?? ""))} is not a URL: give it whole, such as http://host:8080/channel/`,
      CLI_FAILURE_CODES.badUrl,
    );
  }
  if (code === "ERR_SOCKET_BAD_PORT") {
    return plain(
      `${firstLine(String(c.message))}: give a port from 0 to 65535`,
      CLI_FAILURE_CODES.port,
    );
  }
  if (code === "EADDRINUSE" || code === "EADDRNOTAVAIL") {
    const where = `${String(c.address ?? "")}:${String(c.port ?? "")}`;
    return plain(
      `cannot listen on ${where} (${code}): choose another --port or --host (0 picks a free port)`,
      CLI_FAILURE_CODES.port,
    );
  }
  return undefined;
}

/** A server that did not answer, or a file that is not there or not ours. */
function systemFailure(c: NodeErrorLike, code: string): Failure | undefined {
  if (NET_CODES.has(code)) {
    const where =
      c.address !== undefined
        ? `${String(c.address)}${c.port !== undefined ? `:${String(c.port)}` : ""}`
        : String(c.hostname ?? "the server");
    return plain(
      `cannot reach ${where} (${code}): check the address and that the server is up`,
      CLI_FAILURE_CODES.unreachable,
    );
  }
  if (typeof c.path !== "string" || !(code in FILE_WHAT)) return undefined;
  const on = typeof c.syscall === "string" ? ` on ${c.syscall}` : "";
  const family =
    code === "ENOENT"
      ? CLI_FAILURE_CODES.fileNotFound
      : code === "EACCES" || code === "EPERM"
        ? CLI_FAILURE_CODES.fileAccess
        : CLI_FAILURE_CODES.file;
  return plain(`${c.path} ${FILE_WHAT[code]} (${code}${on}): check the path`, family);
}

/**
 * What a thrown value means to the person at the terminal. `command` is the command path
 * ("release build") for the usage hint.
 */
export function describeFailure(e: unknown, command: string): Failure {
  if (e instanceof CommanderError) return commanderFailure(e, command);
  if (isLikenError(e)) return plain(e.message, e.code);
  for (const c of chain(e)) {
    if (typeof c.code !== "string") continue;
    const known = inputFailure(c, c.code) ?? systemFailure(c, c.code);
    if (known !== undefined) return known;
  }
  const what = e instanceof Error ? `${e.name}: ${firstLine(e.message)}` : firstLine(String(e));
  return plain(
    `unexpected failure (${what}); this is a bug in liken: run it again with LIKEN_DEBUG=1 for the stack and report it`,
    CLI_FAILURE_CODES.unexpected,
  );
}

/** The command path of an argv ("release build"), by walking the program's subcommands. */
export function commandPath(
  program: { commands: readonly CommandLike[] },
  args: readonly string[],
): string {
  const names: string[] = [];
  let cur: { commands: readonly CommandLike[] } = program;
  for (const a of args) {
    if (a.startsWith("-")) continue;
    const sub = cur.commands.find((c) => c.name() === a || c.aliases().includes(a));
    if (sub === undefined) break;
    names.push(sub.name());
    cur = sub;
  }
  return names.join(" ");
}

interface CommandLike {
  name(): string;
  aliases(): string[];
  readonly commands: readonly CommandLike[];
}

/** Whether the person asked for stacks: LIKEN_DEBUG=1 or `liken --debug ...`. */
export function debugWanted(argv: readonly string[], env = process.env): boolean {
  return (env.LIKEN_DEBUG ?? "") !== "" && env.LIKEN_DEBUG !== "0"
    ? true
    : argv.slice(2).includes("--debug");
}
