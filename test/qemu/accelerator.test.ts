// The accelerator probe sees a guest run (testbed/accelerator.ts): its boot sector, booted under
// TCG, writes its line; so a KVM that runs guests would be seen running this one. The choice
// for this host ends the file, as every scenario's last line names it.
import { describe, expect, it } from "vitest";
import { accelerator, acceleratorLine, probe } from "../../testbed/accelerator.js";

describe("the accelerator probe", () => {
  it("a probe guest runs under TCG and says its line", async () => {
    const seen = await probe("tcg");
    expect(seen, seen.said).toMatchObject({ ran: true });
  }, 60_000);

  it("chooses, with a reason", async () => {
    const a = await accelerator();
    console.log(acceleratorLine(a));
    expect(["kvm", "tcg"]).toContain(a.name);
    expect(a.why).not.toBe("");
  }, 60_000);
});
