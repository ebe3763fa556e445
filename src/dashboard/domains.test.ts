import { describe, expect, it } from "vitest";
import { text, visitor } from "../../test/dashboard-helpers";
import { TARGET, uniqueLabel } from "../../test/domains";
import { client, seedProject } from "../../test/helpers";

// Validation resolves against the real DNS server of test/global/dns-harness.mjs (zones in
// scripts/dns-harness/start.sh): any <label>.wild.example.test is CNAMEd to us, wrong.example.test elsewhere.
async function signedIn() {
  const api = client();
  const seed = await seedProject(api);
  const v = visitor(api);
  await v.signIn();
  return { api, seed, v, page: `/dashboard/projects/${seed.projectId}/domains` };
}

describe("dashboard domains", () => {
  it("adds a domain with a region from the installation's list and shows the CNAME to create with copy buttons", async () => {
    const { v, page } = await signedIn();
    const form = await v.get(page);
    expect(form.status).toBe(200);
    expect(text(form.html)).toContain("No custom domains yet");
    expect(form.html).toContain('<option value="us-east-1">us-east-1</option>');
    expect(form.html).toContain('<option value="eu-west-2">eu-west-2</option>');
    expect(text(form.html)).toContain("Prefer a subdomain");
    const name = `${uniqueLabel("add")}.wild.example.test`;
    const added = await v.post(page, { domain: name.toUpperCase(), region: "us-east-1" });
    expect(added.status).toBe(303);
    expect(added.location).toBe(`${page}/${name}?added=1`);
    const detail = await v.get(added.location!);
    expect(text(detail.html)).toContain(
      `${name} was added. Create the DNS record below at your DNS provider, then press Validate Domain.`,
    );
    expect(text(detail.html)).toContain("DNS record to create");
    expect(detail.html).toContain(`id="record-name" class="mono" type="text" readonly="" value="${name}"`);
    expect(detail.html).toContain(`id="record-value" class="mono" type="text" readonly="" value="${TARGET}"`);
    expect(detail.html).toContain('data-copy="record-name"');
    expect(detail.html).toContain('data-copy="record-value"');
    expect(text(detail.html)).toContain("Create a CNAME record");
    expect(text(detail.html)).toContain("Pending");
    expect(detail.html).not.toMatch(/<script>|style="/); // the strict CSP allows neither
    const list = await v.get(page);
    expect(list.html).toContain(`>${name}</a>`);
    expect(text(list.html)).toContain("Pending");
  });

  it("advises an ALIAS record for an apex", async () => {
    const { v, page } = await signedIn();
    const added = await v.post(page, { domain: "apex.test", region: "eu-west-2" });
    expect(added.status).toBe(303);
    const detail = await v.get(added.location!);
    expect(detail.html).toContain("<code>ALIAS</code>");
    expect(detail.html).toContain('value="proxy.aws.eu-west-2.service.test"');
    expect(text(detail.html)).toContain("apex.test is an apex");
  });

  it("keeps the input and names the field when the API refuses the domain", async () => {
    const { v, page } = await signedIn();
    const refused = await v.post(page, { domain: "localhost", region: "eu-west-2" });
    expect(refused.status).toBe(400);
    expect(text(refused.html)).toContain("The domain was not added: Validation failed.");
    expect(refused.html).toContain('value="localhost"');
    expect(refused.html).toContain('<option value="eu-west-2" selected="">');
    expect(refused.html).toMatch(/id="field-domain"[^>]*aria-invalid="true"/);
    expect(refused.html).not.toContain('"type":');

    const badRegion = await v.post(page, { domain: `${uniqueLabel("r")}.example.test`, region: "mars-1" });
    expect(badRegion.status).toBe(400);
    expect(badRegion.html).toMatch(/id="field-region-error"/);
  });

  it("adds a hostname another project also claims, and shows the TXT ownership record to create with copy buttons", async () => {
    const { api, v, page } = await signedIn();
    const other = await seedProject(api);
    const name = `${uniqueLabel("contested")}.example.test`;
    expect(
      (await v.post(`/dashboard/projects/${other.projectId}/domains`, { domain: name, region: "us-east-1" })).status,
    ).toBe(303);
    const added = await v.post(page, { domain: name, region: "us-east-1" });
    expect(added.status).toBe(303);
    const detail = await v.get(added.location!);
    expect(text(detail.html)).toContain("Ownership record required.");
    expect(detail.html).toContain(
      `id="record-txt-name" class="mono" type="text" readonly="" value="_gateway-challenge.${name}"`,
    );
    expect(detail.html).toMatch(/id="record-txt-value" class="mono" type="text" readonly="" value="gw-[0-9a-f]{32}"/);
    expect(detail.html).toContain('data-copy="record-txt-name"');
    expect(detail.html).toContain('data-copy="record-txt-value"');
    // The same project again: 409, the form kept.
    const again = await v.post(page, { domain: name, region: "us-east-1" });
    expect(again.status).toBe(409);
    expect(again.html).toContain(`value="${name}"`);
  });

  it("shows no ownership record while the hostname is uncontested", async () => {
    const { v, page } = await signedIn();
    const added = await v.post(page, { domain: `${uniqueLabel("alone")}.example.test`, region: "us-east-1" });
    const detail = await v.get(added.location!);
    expect(detail.html).not.toContain("record-txt-name");
    expect(text(detail.html)).not.toContain("Ownership record required.");
  });

  it("validates a correctly pointed domain from the Validate Domain button and says Validated", async () => {
    const { api, v, page, seed } = await signedIn();
    const name = `${uniqueLabel("ok")}.wild.example.test`;
    await v.post(page, { domain: name, region: "us-east-1" });
    const checked = await v.post(`${page}/${name}/validate`, {});
    expect(checked.status).toBe(303);
    expect(checked.location).toBe(`${page}/${name}?checked=1`);
    const result = await v.get(checked.location!);
    expect(text(result.html)).toContain(`Validated. ${name} points at us`);
    const read = await api.json<{ status: string }>(`/v2/projects/${seed.projectId}/domains/${name}`);
    expect(read.body.status).toBe("validated");
    expect(text((await v.get(page)).html)).toContain("Validated");
  });

  it("shows a failed domain's error code and sentence, last and next attempt and the window's end in the status dialog and its page", async () => {
    const { api, v, page } = await signedIn();
    await v.post(page, { domain: "wrong.example.test", region: "us-east-1" });
    api.clock.advance(60_000);
    const checked = await v.post(`${page}/wrong.example.test/validate`, {});
    const result = await v.get(checked.location!);
    expect(text(result.html)).toMatch(
      /Not validated: Failed\. WRONG_TARGET ?: wrong\.example\.test has a CNAME to elsewhere\.test/,
    );

    const list = await v.get(page);
    const dialog = /<dialog id="status-0"[\s\S]*?<\/dialog>/.exec(list.html)?.[0] ?? "";
    expect(dialog).toContain('aria-labelledby="status-0-title"');
    expect(dialog).toContain('href="/dashboard/projects/'); // the dialog's opener falls back to the status page
    for (const facts of [text(dialog), text((await v.get(`${page}/wrong.example.test/status`)).html)]) {
      expect(facts).toContain("Failed");
      expect(facts).toMatch(/Last error WRONG_TARGET ?: wrong\.example\.test has a CNAME to elsewhere\.test/);
      expect(facts).toContain("Last attempt 2026-11-21 12:01:00 UTC");
      expect(facts).toContain("Next automatic attempt none while it is failed");
      expect(facts).toContain("Automatic attempts end 2026-11-23 12:00:00 UTC");
      expect(facts).toContain("Validate Domain");
    }
    expect(list.html).toContain(`data-dialog="status-0"`);
    expect(list.html).toContain(`href="${page}/wrong.example.test/status"`);
  });

  it("says when automatic attempts have ended and Validate Domain is what is left", async () => {
    const { api, v, page } = await signedIn();
    const name = `${uniqueLabel("late")}.example.test`;
    await v.post(page, { domain: name, region: "us-east-1" });
    const pending = text((await v.get(`${page}/${name}/status`)).html);
    expect(pending).toContain("Next automatic attempt 2026-11-21 12:30:00 UTC");
    api.clock.advance(3 * 24 * 3600 * 1000);
    await v.signIn(); // the session of 3 days ago has expired
    const status = text((await v.get(`${page}/${name}/status`)).html);
    expect(status).toContain("(ended: use Validate Domain)");
    expect(status).toContain("Next automatic attempt none: automatic attempts have ended");
  });

  it("removes a domain after a confirmation page", async () => {
    const { api, v, page, seed } = await signedIn();
    const name = `${uniqueLabel("rm")}.example.test`;
    await v.post(page, { domain: name, region: "us-east-1" });
    const confirm = await v.get(`${page}/${name}/remove`);
    expect(text(confirm.html)).toContain(`Remove ${name}?`);
    expect(confirm.html).toContain(`action="${page}/${name}/remove"`);
    const removed = await v.post(`${page}/${name}/remove`, {});
    expect(removed.status).toBe(303);
    const after = await v.get(removed.location!);
    expect(text(after.html)).toContain(`${name} was removed`);
    expect((await api.json(`/v2/projects/${seed.projectId}/domains/${name}`)).status).toBe(404);
    const again = await v.post(`${page}/${name}/remove`, {});
    expect(again.status).toBe(404);
    expect(text(again.html)).toContain("The domain was not removed: Not found.");
  });

  it("shows a not-found page for a domain the project does not have", async () => {
    const { v, page } = await signedIn();
    for (const path of [
      `${page}/nope.example.test`,
      `${page}/nope.example.test/status`,
      `${page}/nope.example.test/remove`,
    ]) {
      const missing = await v.get(path);
      expect(missing.status, path).toBe(404);
      expect(text(missing.html), path).toContain("Domain not found");
    }
    const validate = await v.post(`${page}/nope.example.test/validate`, {});
    expect(validate.status).toBe(404);
  });

  it("names a removed domain only when it looks like a hostname and is gone", async () => {
    const { v, page } = await signedIn();
    const odd = await v.get(`${page}?removed=${encodeURIComponent("Your account is closed, call +1 555")}`);
    expect(text(odd.html)).not.toContain("was removed");
    const name = `${uniqueLabel("kept")}.example.test`;
    await v.post(page, { domain: name, region: "us-east-1" });
    expect(text((await v.get(`${page}?removed=${name}`)).html)).not.toContain("was removed");
  });
});
