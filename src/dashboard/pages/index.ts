import type { DashRouter } from "../context";
import { registerApiKeys } from "./api-keys";
import { registerApps } from "./apps";
import { registerAuditLog } from "./audit-log";
import { registerDeliveries } from "./deliveries";
import { registerDomains } from "./domains";
import { registerMembers } from "./members";
import { registerProjects } from "./projects";
import { registerReceiver } from "./receiver";
import { registerReceivers } from "./receivers";
import { registerRun } from "./run";
import { registerRuns } from "./runs";
import { registerUsage } from "./usage";

/**
 * The signed-in pages. A new page is one file here exporting `register(dash)` (routes under
 * `/projects/:project_id/<slug>`), plus its tab in `../nav.ts`.
 */
export const PAGES: ((dash: DashRouter) => void)[] = [
  registerProjects,
  registerApiKeys,
  registerApps,
  registerDomains,
  registerUsage,
  registerRuns,
  registerRun,
  registerDeliveries,
  registerReceivers,
  registerReceiver,
  registerAuditLog,
  registerMembers,
];
