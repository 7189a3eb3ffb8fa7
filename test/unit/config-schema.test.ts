// agent.yaml is declared once (src/agent/config-schema.ts): the published JSON Schema is that
// declaration's, the example the agent package ships passes it, and a typo is refused by both
// the agent and the schema an editor reads, naming the key path and the keys allowed.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { agentJsonSchema } from "../../src/agent/config-schema.js";
import { parseAgentSection } from "../../src/agent/config.js";
import { AGENT_SCHEMA_FILE } from "../../src/deploy/schema.js";
import { keyPath } from "../../src/schema/index.js";
import { parseAgentConfig } from "../../src/slots/config.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const EXAMPLE = path.join(ROOT, "testbed", "agent.yaml.example");
const FILE = "/etc/liken/agent.yaml";

// ajv 6: the draft-07 validator editors' YAML servers are built on.
type Validate = ((doc: unknown) => boolean) & { errors?: { dataPath: string; message: string }[] };
const Ajv = createRequire(import.meta.url)("ajv") as new (o: object) => {
  compile(s: object): Validate;
};
const validate = new Ajv({ allErrors: true }).compile(
  JSON.parse(readFileSync(AGENT_SCHEMA_FILE, "utf8")) as object,
);

function agent(text: string) {
  return parseAgentSection(text, FILE, parseAgentConfig(text, FILE));
}

describe("agent.yaml's schema", () => {
  it("the committed config/schema/agent.schema.json is the declaration's (npm run schema:generate)", () => {
    expect(JSON.parse(readFileSync(AGENT_SCHEMA_FILE, "utf8"))).toEqual(agentJsonSchema());
  });

  it("the example the agent package ships names the schema, passes it, and reads", () => {
    const text = readFileSync(EXAMPLE, "utf8");
    expect(text).toMatch(/^# yaml-language-server: \$schema=\S+agent\.schema\.json$/m);
    expect(validate(parse(text)), JSON.stringify(validate.errors)).toBe(true);
    expect(agent(text)).toMatchObject({ machine: "node-4", cluster: "prod" });
  });

  it("a typo is refused by the agent with the key path and the keys allowed, and by the schema", () => {
    const text = readFileSync(EXAMPLE, "utf8").replace("heartbeatSeconds:", "heartbeatSecond:");
    expect(() => agent(text)).toThrow(
      /heartbeatSecond is not a known field \(known: machine, cluster, nodeName, .*heartbeatSeconds, /,
    );
    expect(validate(parse(text))).toBe(false);
    const nested = readFileSync(EXAMPLE, "utf8").replace("envDir:", "envdir:");
    expect(() => agent(nested)).toThrow(
      /bootloader\.envdir is not a field of the grub backend \(its fields: backend, envDir\)/,
    );
    expect(validate(parse(nested))).toBe(false);
  });

  it("names every problem of a file at once, each with its value", () => {
    const text = readFileSync(EXAMPLE, "utf8")
      .replace("heartbeatSeconds: 10", "heartbeatSeconds: 40")
      .replace("loopSeconds: 5", "loopSeconds: fast");
    expect(() => agent(text)).toThrow(
      /heartbeatSeconds must be between 1 and 10: .* \(got 40\); loopSeconds must be a positive number \(got "fast"\)/,
    );
    expect(validate(parse(text))).toBe(false);
  });

  it("a value that is not a positive number is told that alone, not the bounds too", () => {
    const text = readFileSync(EXAMPLE, "utf8") + "timeouts: { proveMs: 0 }\n";
    let error: unknown;
    try {
      agent(text);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({
      code: "LIKEN_AGENT_CONFIG_INVALID",
      message: `${FILE}: timeouts.proveMs must be a positive number (got 0)`,
      context: { field: "timeouts.proveMs", fields: ["timeouts.proveMs"] },
    });
  });

  it("the schema carries the bounds the agent enforces", () => {
    const ok = parse(readFileSync(EXAMPLE, "utf8")) as Record<string, unknown>;
    for (const [k, v] of [
      ["heartbeatSeconds", 10.5],
      ["loopSeconds", 0.01],
      ["timeouts", { proveMs: 900 }],
      ["timeouts", { proveMS: 1000 }],
      ["reboot", { exitCode: 255 }],
      ["direct", "yes"],
    ] as const) {
      expect(validate({ ...ok, [k]: v }), `${k}: ${JSON.stringify(v)}`).toBe(false);
      expect(() => agent(JSON.stringify({ ...ok, [k]: v })), k).toThrow(
        new RegExp(`^${FILE}: ${k}`),
      );
    }
  });

  it.each([
    [["machine"], "machine"],
    [["timeouts", "proveMs"], "timeouts.proveMs"],
    [["health", "commands", 0, "name"], "health.commands[0].name"],
  ] as const)("writes the key path %j as %s", (p, want) => {
    expect(keyPath(p)).toBe(want);
  });
});
