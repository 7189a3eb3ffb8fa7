// The lean client's kubeconfig reading (src/api/rest.ts): the forms an agent uses, and a
// refusal that says what to do for the ones it does not take.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/api/errors.js";
import { loadRestConfig } from "../../src/api/rest.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-rest-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function kubeconfig(name: string, cluster: string, user: string): string {
  const file = path.join(dir, name);
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: ${cluster}}]
users: [{name: u, user: ${user}}]
contexts: [{name: other, context: {cluster: none, user: none}}, {name: x, context: {cluster: c, user: u}}]
current-context: x
`,
  );
  return file;
}

describe("loadRestConfig", () => {
  it("reads a client certificate, key and CA from files next to the kubeconfig", () => {
    writeFileSync(path.join(dir, "ca.crt"), "CA");
    writeFileSync(path.join(dir, "m.crt"), "CERT");
    writeFileSync(path.join(dir, "m.key"), "KEY");
    const f = kubeconfig(
      "certs",
      "{server: 'https://10.0.0.1:6443/', certificate-authority: ca.crt}",
      "{client-certificate: m.crt, client-key: m.key}",
    );
    const c = loadRestConfig(f);
    expect(c.server).toBe("https://10.0.0.1:6443");
    expect([c.ca?.toString(), c.cert?.toString(), c.key?.toString()]).toEqual([
      "CA",
      "CERT",
      "KEY",
    ]);
    expect(c.insecure).toBe(false);
  });

  it("takes inline data, a token and a token file", () => {
    const data = Buffer.from("PEM").toString("base64");
    const f = kubeconfig(
      "token",
      `{server: 'https://h', certificate-authority-data: ${data}, insecure-skip-tls-verify: true}`,
      "{token: abc, tokenFile: sa/token}",
    );
    const c = loadRestConfig(f);
    expect(c.ca?.toString()).toBe("PEM");
    expect(c.token).toBe("abc");
    expect(c.tokenFile).toBe(path.join(dir, "sa", "token"));
    expect(c.insecure).toBe(true);
  });

  it("refuses an exec plugin and says which forms it takes", () => {
    const f = kubeconfig("exec", "{server: 'https://h'}", "{exec: {command: aws}}");
    const e = (() => {
      try {
        loadRestConfig(f);
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).message).toMatch(/client certificate or a token; exec plugins/);
  });

  it("refuses a kubeconfig whose context names no cluster", () => {
    const f = path.join(dir, "empty");
    writeFileSync(f, "apiVersion: v1\nkind: Config\n");
    expect(() => loadRestConfig(f)).toThrow(/no current context with a cluster/);
  });
});
