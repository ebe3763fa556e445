import { eq } from "drizzle-orm";
import { domains } from "../db/schema";
import { ApiError, invalidField } from "../platform/errors";
import { createRouter } from "../platform/router";
import { newId } from "../platform/ids";
import { listPage } from "../platform/pagination";
import { CertificateError } from "./certificates";
import { checkHostname } from "./hostname";
import { forgetHost } from "./lookup";
import { createDomain, deleteDomain, getDomain, listDomains, validateDomainRoute } from "./routes";
import { AUTO_VALIDATION_WINDOW_MS, domainJson, findDomain, nextTick } from "./store";
import { provisionCertificate, refreshCertificate, validateDomain } from "./validate";

const badField = (field: string, message: string, detail: string) => invalidField("body", field, message, detail);

export const domainsRouter = createRouter()
  .openapi(createDomain, async (c) => {
    const { project_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const config = c.var.scope.config;
    const checked = checkHostname(body.domain, { serviceDomain: config.serviceDomain, apiHostnames: config.apiHostnames });
    if (!checked.ok) throw badField("domain", checked.reason, `'${body.domain.slice(0, 300)}' cannot be a custom domain: it ${checked.reason}.`);
    if (!config.regions.includes(body.region)) {
      throw badField("region", `must be one of ${config.regions.join(", ")}`, `region must be one of ${config.regions.join(", ")}.`);
    }
    const now = c.var.scope.deps.now();
    const db = c.var.scope.db;
    const [created] = await db
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
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing()
      .returning();
    if (!created) {
      const [holder] = await db.select({ projectId: domains.projectId }).from(domains).where(eq(domains.hostname, checked.hostname)).limit(1);
      throw new ApiError(
        "conflict",
        holder?.projectId === project_id
          ? `${checked.hostname} is already a domain of this project.`
          : `${checked.hostname} is already claimed by another project. If it is yours, remove it there first.`,
      );
    }
    // A cached "unknown host" answer must not outlive the domain's creation in this isolate.
    forgetHost(created.hostname);
    return c.json(domainJson(created, config), 201);
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
    const config = c.var.scope.config;
    return c.json({ data: items.map((d) => domainJson(d, config)), next_cursor: nextCursor }, 200);
  })
  .openapi(getDomain, async (c) => {
    const { project_id, domain } = c.req.valid("param");
    return c.json(domainJson(await findDomain(c.var.scope.db, project_id, domain), c.var.scope.config), 200);
  })
  .openapi(deleteDomain, async (c) => {
    const { project_id, domain: name } = c.req.valid("param");
    const s = c.var.scope;
    const domain = await findDomain(s.db, project_id, name);
    // The certificate goes first: if the provider cannot be reached, nothing is lost and a retry
    // finishes the job (a custom hostname that is already gone counts as removed).
    if (domain.certificateRef) {
      try {
        await s.deps.certificates(s.config).remove(domain.certificateRef);
      } catch (error) {
        if (!(error instanceof CertificateError)) throw error;
        throw new ApiError("service_unavailable", `The domain's certificate could not be removed (${error.message}); nothing was deleted. Try again.`);
      }
    }
    await s.db.delete(domains).where(eq(domains.id, domain.id));
    forgetHost(domain.hostname);
    return c.json(domainJson(domain, s.config), 200);
  })
  .openapi(validateDomainRoute, async (c) => {
    const { project_id, domain: name } = c.req.valid("param");
    const s = c.var.scope;
    const domain = await findDomain(s.db, project_id, name);
    if (domain.status !== "validated") return c.json(domainJson(await validateDomain(s, domain), s.config), 200);
    if (domain.certificateStatus === "active") return c.json(domainJson(domain, s.config), 200);
    const refreshed = domain.certificateStatus === "failed" ? await provisionCertificate(s, domain) : await refreshCertificate(s, domain);
    return c.json(domainJson(refreshed, s.config), 200);
  });
