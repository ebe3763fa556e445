/**
 * The tabs of a project, in order. A new page adds its entry here and its routes in `pages/`; the slug
 * is the path segment after `/dashboard/projects/{project_id}/`.
 */
export const PROJECT_NAV: readonly { slug: string; label: string }[] = [
  { slug: "usage", label: "Usage" },
  { slug: "apps", label: "Apps and builds" },
  { slug: "api-keys", label: "API Keys" },
  { slug: "domains", label: "Domains" },
  { slug: "runs", label: "Runs" },
  { slug: "webhook-deliveries", label: "Webhook deliveries" },
  { slug: "webhook-receivers", label: "Receivers" },
  { slug: "members", label: "Members" },
  { slug: "audit-log", label: "Audit log" },
];
