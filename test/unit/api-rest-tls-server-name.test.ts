// A machine dials the API server at an address its certificate does not name (a QEMU guest
// reaches the host's apiserver, whose certificate names 127.0.0.1 and localhost, through
// 10.0.2.100): the kubeconfig's tls-server-name says which name to check instead. Real TLS
// here: a server whose certificate names only localhost, dialled at 127.0.0.1.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRestConfig, Rest } from "../../src/api/rest.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-rest-tls-"));
let server: https.Server;
let port = 0;

beforeAll(async () => {
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost",
      "-keyout",
      path.join(dir, "server.key"),
      "-out",
      path.join(dir, "server.crt"),
    ],
    { stdio: "ignore" },
  );
  server = https.createServer(
    {
      key: readFileSync(path.join(dir, "server.key")),
      cert: readFileSync(path.join(dir, "server.crt")),
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
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:${port}', certificate-authority: server.crt${name}}}]
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
