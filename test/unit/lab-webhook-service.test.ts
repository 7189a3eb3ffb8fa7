// The lab's stand-in for the webhook's Service: connections go to the copies in turn, and a
// copy that refuses connections (stopped) is passed over.
import { connect, createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startWebhookService, type WebhookService } from "../../src/lab/webhook-service.js";

const servers: Server[] = [];
let service: WebhookService | undefined;

afterEach(async () => {
  await service?.close();
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

/** A copy that answers every connection with its name. */
async function copy(port: number, name: string): Promise<void> {
  const s = createServer((c) => c.end(name));
  servers.push(s);
  await new Promise<void>((r) => s.listen(port, "127.0.0.1", r));
}

function ask(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const c = connect(port, "127.0.0.1");
    c.on("data", (d) => (got += String(d)));
    c.on("end", () => resolve(got));
    c.on("close", () => resolve(got));
    c.on("error", reject);
  });
}

describe("the lab's webhook Service", () => {
  it("sends connections to each copy in turn", async () => {
    service = await startWebhookService(2);
    await copy(service.backends[0]!, "one");
    await copy(service.backends[1]!, "two");
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await ask(service.port));
    expect(answers.sort()).toEqual(["one", "one", "two", "two"]);
  });

  it("passes over a copy that is not running", async () => {
    service = await startWebhookService(2);
    await copy(service.backends[1]!, "two");
    for (let i = 0; i < 3; i++) expect(await ask(service.port)).toBe("two");
  });

  it("closes the connection when no copy runs (the API server then fails closed)", async () => {
    service = await startWebhookService(2);
    expect(await ask(service.port)).toBe("");
  });
});
