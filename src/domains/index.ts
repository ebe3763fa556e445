import { count, eq } from "drizzle-orm";
import { auditAs } from "../audit";
import { domains } from "../db/schema";
import { ApiError, invalidField } from "../platform/errors";
import { createRouter } from "../platform/router";
import { newId } from "../platform/ids";
import { listPage } from "../platform/pagination";
import { CertificateError } from "./certificates";
import { checkHostname } from "./hostname";
import { forgetHost } from "./lookup";
import { createDomain, deleteDomain, getDomain, listDomains, validateDomainRoute } from "./routes";
import { sendFirstAttempt } from "./first-attempt";
import { newOwnershipValue, releaseStatement } from "./ownership";
import { AUTO_VALIDATION_WINDOW_MS, domainsJson, findDomain, nextTick, oneDomainJson } from "./store";
import { provisionCertificate, refreshCertificate, validateDomain } from "./validate";

const badField = (field: string, message: string, detail: string) => invalidField("body", field, message, detail);

export const domainsRouter = createRouter()
  .openapi(createDomain, async (c) => {
    const { project_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const config = c.var.scope.config;
    const checked = checkHostname(body.domain, {
      serviceDomain: config.serviceDomain,
      apiHostnames: config.apiHostnames,
    });
    if (!checked.ok)
      throw badField(
        "domain",
        checked.reason,
        `'${body.domain.slice(0, 300)}' cannot be a custom domain: it ${checked.reason}.`,
      );
    if (!config.regions.includes(body.region)) {
      throw badField(
        "region",
        `must be one of ${config.regions.join(", ")}`,
        `region must be one of ${config.regions.join(", ")}.`,
      );
    }
    const now = c.var.scope.deps.now();
    const db = c.var.scope.db;
    // Insert and count in one transaction: two concurrent creations cannot both slip under the cap.
    const [[created], [total]] = await db.batch([
      db
        .insert(domains)
        .values({
          id: newId("dom", now.getTime()),
          projectId: project_id,
          hostname: checked.hostname,
          region: body.region,
          apex: checked.apex,
          status: "pending",
          nextCheckAt: nextTick(now),
          autoValidationEndsAt: new Date(now.getTime() + AUTO_VALIDATION_WINDOW_MS),
          certificateStatus: "none",
          ownershipValue: newOwnershipValue(),
          createdAt: now,
          updatedAt: now,
        })
        // Only this project's own claim conflicts: other projects' claims never block (docs/domains.md, Ownership).
        .onConflictDoNothing({ target: [domains.projectId, domains.hostname] })
        .returning(),
      db.select({ n: count() }).from(domains).where(eq(domains.projectId, project_id)),
    ]);
    if (!created) throw new ApiError("conflict", `${checked.hostname} is already a domain of this project.`);
    const limit = config.maxDomainsPerProject;
    if ((total?.n ?? 0) > limit) {
      await db.delete(domains).where(eq(domains.id, created.id));
      throw new ApiError(
        "conflict",
        `This project already has ${limit} domains, the most one project may have (MAX_DOMAINS_PER_PROJECT). Remove one it no longer needs; claims never validated are removed 30 days after their automatic validation ends.`,
        { extensions: { limit } },
      );
    }
    // A cached "unknown host" answer must not outlive the domain's creation in this isolate.
    forgetHost(created.hostname);
    c.var.scope.ctx.waitUntil(sendFirstAttempt(c.var.scope.env, created, now));
    auditAs(c, {
      action: "domain.create",
      target: { type: "domain", id: created.hostname },
      details: { region: created.region },
    });
    return c.json(await oneDomainJson(db, config, now, created), 201);
  })
  .openapi(listDomains, async (c) => {
    const { project_id } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    const { items, nextCursor } = await listPage(c.var.scope.db, domains, {
      filter: eq(domains.projectId, project_id),
      key: domains.hostname,
      keyOf: (d) => d.hostname,
      order: "asc",
      limit,
      cursor,
    });
    const { db, config, deps } = c.var.scope;
    return c.json({ data: await domainsJson(db, config, deps.now(), items), next_cursor: nextCursor }, 200);
  })
  .openapi(getDomain, async (c) => {
    const { project_id, domain } = c.req.valid("param");
    const { db, config, deps } = c.var.scope;
    return c.json(await oneDomainJson(db, config, deps.now(), await findDomain(db, project_id, domain)), 200);
  })
  .openapi(deleteDomain, async (c) => {
    const { project_id, domain: name } = c.req.valid("param");
    auditAs(c, { action: "domain.delete", target: { type: "domain", id: name } });
    const s = c.var.scope;
    const domain = await findDomain(s.db, project_id, name);
    // The certificate goes first: if the provider cannot be reached, nothing is lost and a retry
    // finishes the job (a custom hostname that is already gone counts as removed).
    if (domain.certificateRef) {
      try {
        await s.deps.certificates(s.config).remove(domain.certificateRef);
      } catch (error) {
        if (!(error instanceof CertificateError)) throw error;
        throw new ApiError(
          "service_unavailable",
          `The domain's certificate could not be removed (${error.message}); nothing was deleted. Try again.`,
        );
      }
    }
    const now = s.deps.now();
    const answer = await oneDomainJson(s.db, s.config, now, domain);
    const remove = s.db.delete(domains).where(eq(domains.id, domain.id));
    // A hostname given up after it was held stays contested for 30 days: its CNAME may still point here.
    if (domain.status === "validated")
      await s.db.batch([remove, releaseStatement(s.db, domain.hostname, domain.projectId, now)]);
    else await remove;
    forgetHost(domain.hostname);
    return c.json(answer, 200);
  })
  .openapi(validateDomainRoute, async (c) => {
    const { project_id, domain: name } = c.req.valid("param");
    auditAs(c, { action: "domain.validate", target: { type: "domain", id: name } });
    const s = c.var.scope;
    const domain = await findDomain(s.db, project_id, name);
    const json = async (d: typeof domain) => c.json(await oneDomainJson(s.db, s.config, s.deps.now(), d), 200);
    if (domain.status !== "validated") return json(await validateDomain(s, domain));
    if (domain.certificateStatus === "active") return json(domain);
    return json(
      domain.certificateStatus === "failed"
        ? await provisionCertificate(s, domain)
        : await refreshCertificate(s, domain),
    );
  });
