// How a failure reaches the terminal: each kind of thrown value, the one line it becomes and
// its stable code (src/cli/failure.ts). The process-level sweep is cli-bad-input.test.ts.
import { CommanderError } from "commander";
import { describe, expect, it } from "vitest";
import { LikenError } from "../../src/errors.js";
import { commandPath, debugWanted, describeFailure } from "../../src/cli/failure.js";

function nodeError(code: string, props: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(`${code}: something`), { code, ...props });
}

const urlError = (() => {
  try {
    new URL("127.0.0.1:44337/");
  } catch (e) {
    return e;
  }
  throw new Error("unreachable");
})();

describe("describeFailure", () => {
  it.each([
    [
      "a liken error",
      new LikenError("LIKEN_X_Y", "the thing is wrong: fix it"),
      "LIKEN_X_Y",
      /^the thing is wrong: fix it$/,
    ],
    [
      "a missing file",
      nodeError("ENOENT", { path: "/x/slot.img", syscall: "open" }),
      "LIKEN_CLI_FILE_NOT_FOUND",
      /^\/x\/slot\.img does not exist \(ENOENT on open\): check the path$/,
    ],
    [
      "a file not ours",
      nodeError("EACCES", { path: "/root/k", syscall: "open" }),
      "LIKEN_CLI_FILE_ACCESS",
      /^\/root\/k is not readable/,
    ],
    [
      "a URL without a scheme",
      urlError,
      "LIKEN_CLI_BAD_URL",
      /^"127\.0\.0\.1:44337\/" is not a URL: give it whole/,
    ],
    [
      "a refused connection, wrapped by fetch",
      Object.assign(new TypeError("fetch failed"), {
        cause: nodeError("ECONNREFUSED", { address: "127.0.0.1", port: 9 }),
      }),
      "LIKEN_CLI_UNREACHABLE",
      /^cannot reach 127\.0\.0\.1:9 \(ECONNREFUSED\)/,
    ],
    [
      "a port taken",
      nodeError("EADDRINUSE", { address: "0.0.0.0", port: 80 }),
      "LIKEN_CLI_PORT",
      /^cannot listen on 0\.0\.0\.0:80/,
    ],
    [
      "anything else",
      new TypeError("x is not a function\n    at y (z.js:1:1)"),
      "LIKEN_CLI_UNEXPECTED",
      /^unexpected failure \(TypeError: x is not a function\); this is a bug in liken: run it again with LIKEN_DEBUG=1/,
    ],
  ])("%s", (_why, error, code, message) => {
    const f = describeFailure(error, "release build");
    expect(f.code).toBe(code);
    expect(f.message).toMatch(message);
    expect(f.message).not.toContain("\n");
    expect(f.exitCode).toBe(1);
  });

  it("a usage error names the command's help; help and version are silent", () => {
    const usage = new CommanderError(1, "commander.unknownOption", "error: unknown option '--x'");
    expect(describeFailure(usage, "release build")).toEqual({
      message: "unknown option '--x'; see: liken release build --help",
      code: "LIKEN_CLI_USAGE",
      exitCode: 1,
      silent: false,
    });
    const help = new CommanderError(0, "commander.helpDisplayed", "(outputHelp)");
    expect(describeFailure(help, "")).toMatchObject({ silent: true, exitCode: 0 });
  });
});

describe("commandPath and debugWanted", () => {
  interface Leaf {
    name(): string;
    aliases(): string[];
    commands: Leaf[];
  }
  const leaf = (name: string, commands: Leaf[] = [], aliases: string[] = []): Leaf => ({
    name: () => name,
    aliases: () => aliases,
    commands,
  });
  const program = { commands: [leaf("release", [leaf("sign", [leaf("init")], ["channel"])])] };

  it("walks subcommands and aliases, skipping options", () => {
    expect(commandPath(program, ["release", "channel", "init", "--repo", "x"])).toBe(
      "release sign init",
    );
    expect(commandPath(program, ["--debug", "nope"])).toBe("");
  });

  it("stacks only when asked", () => {
    expect(debugWanted(["node", "liken", "status"], {})).toBe(false);
    expect(debugWanted(["node", "liken", "--debug", "status"], {})).toBe(true);
    expect(debugWanted(["node", "liken"], { LIKEN_DEBUG: "1" })).toBe(true);
    expect(debugWanted(["node", "liken"], { LIKEN_DEBUG: "0" })).toBe(false);
  });
});
