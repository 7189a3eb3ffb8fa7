// A machine dials the API server at an address its certificate does not name (a QEMU guest
// reaches the host's apiserver, whose certificate names 127.0.0.1 and localhost, through
// 10.0.2.100): the kubeconfig's tls-server-name says which name to check instead. Real TLS
// here: a server whose certificate names only localhost, dialled at 127.0.0.1.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { issueTlsMaterial } from "../../src/operator/webhook/certs.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-rest-tls-"));
let server: https.Server;
let port = 0;

beforeAll(async () => {
  // The operator's issuer: a CA and a serving certificate naming only localhost.
  const tls = await issueTlsMaterial(["localhost"]);
  writeFileSync(path.join(dir, "ca.crt"), tls.caCert);
  server = https.createServer(
    {
      key: tls.key,
      cert: tls.cert,
    },
    (_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ kind: "Status", ok: true }));
    },
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function client(serverName: string | undefined): Rest {
  const file = path.join(dir, `kubeconfig-${serverName ?? "none"}`);
  const name = serverName === undefined ? "" : `, tls-server-name: ${serverName}`;
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:${port}', certificate-authority: ca.crt${name}}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
  );
  return new Rest(loadRestConfig(file));
}

const op = { verb: "get", kind: "Status" };

describe("the lean client and tls-server-name", () => {
  it("checks the certificate against tls-server-name, not the address dialled", async () => {
    await expect(client("localhost").request("GET", "/", { op })).resolves.toEqual({
      kind: "Status",
      ok: true,
    });
  });

  it("refuses the same server without it: the certificate does not name 127.0.0.1", async () => {
    await expect(client(undefined).request("GET", "/", { op })).rejects.toThrow(
      /127\.0\.0\.1|altname|IP/i,
    );
  });
});
