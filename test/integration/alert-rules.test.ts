// liken's alert rules (config/monitoring/prometheus-rule.yaml) judged by the pinned promtool:
// `promtool check rules` accepts them, and `promtool test rules` runs the unit tests of
// test/promtool/alerts.test.yaml (each alert quiet when healthy, pending within its `for`,
// firing after it with the annotations a person reads). A guard below refuses an alert that
// has no unit test there. Cold, the setup builds promtool from the Go module proxy.
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { needsTool } from "../support/tool-build.js";
import { parse } from "yaml";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { alertNames, ruleGroups, rulesFile } from "../../src/deploy/monitoring.js";

const exec = promisify(execFile);
const UNIT_TESTS = path.join(REPO_ROOT, "test", "promtool", "alerts.test.yaml");
let promtool = "";
let dir = "";

needsTool("promtool", (bin) => (promtool = bin));
beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "liken-alert-rules-"));
  writeFileSync(path.join(dir, "rules.yaml"), rulesFile(ruleGroups()));
  copyFileSync(UNIT_TESTS, path.join(dir, "alerts.test.yaml"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(args: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await exec(promtool, args, { cwd: dir });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? -1, out: `${x.stdout ?? ""}${x.stderr ?? ""}` };
  }
}

describe("liken's alert rules", () => {
  it("pass promtool check rules", async () => {
    const r = await run(["check", "rules", "rules.yaml"]);
    expect(r, r.out).toMatchObject({ code: 0 });
    expect(r.out).toMatch(/SUCCESS: \d+ rules found/);
  });

  it("pass their promtool unit tests, and every alert has one", async () => {
    const tests = parse(readFileSync(UNIT_TESTS, "utf8")) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const firedInATest = new Set(
      tests.tests.flatMap((t) =>
        (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname),
      ),
    );
    expect(alertNames(ruleGroups()).filter((a) => !firedInATest.has(a))).toEqual([]);
    const r = await run(["test", "rules", "alerts.test.yaml"]);
    expect(r, r.out).toMatchObject({ code: 0 });
    expect(r.out).toContain("SUCCESS");
  });
});
