import { type Page, seg } from "./api";
import type { Member, ServiceAccountItem } from "./api-types";
import { can } from "./access";
import type { DashContext } from "./context";

/**
 * Who made a run, by name: a run's record keeps the caller's id (`sa:<id>`, `user:<id>`, `jwt:<subject>`,
 * `admin`), never a name that could go stale; the page looks the names up as they are now. Service
 * accounts are listed only to those who may manage them (the API's rule), members to every member;
 * a name not found leaves the id, which is always on hover.
 */
export interface CallerNames {
  keys: Map<string, string>;
  people: Map<string, string>;
}

/** The lists are read whole up to this many entries; a project with more shows the rest by id. */
const NAMES_READ = 100;

export async function callerNames(c: DashContext, projectId: string): Promise<CallerNames> {
  const api = c.get("api");
  const [keys, people] = await Promise.all([
    can(c, "service_accounts:write")
      ? api<Page<ServiceAccountItem>>("GET", `/projects/${seg(projectId)}/service-accounts?limit=${NAMES_READ}`)
      : null,
    api<Page<Member>>("GET", `/projects/${seg(projectId)}/members?limit=${NAMES_READ}`),
  ]);
  return {
    keys: new Map(keys?.ok ? keys.data.data.map((k) => [k.id, k.name]) : []),
    people: new Map(people.ok ? people.data.data.map((m) => [m.user_id, m.name ?? m.email ?? m.user_id]) : []),
  };
}

/** A caller in words: the key's name, the person's, a JWT's subject, or the operator; the id on hover. */
export function callerLabel(caller: string, names: CallerNames): { text: string; kind: string } {
  const [kind, ...rest] = caller.split(":");
  const id = rest.join(":");
  if (kind === "sa") {
    const name = names.keys.get(id);
    return { text: name ? `key “${name}”` : "a service account", kind: "service account" };
  }
  if (kind === "user") return { text: names.people.get(id) ?? "a person", kind: "person" };
  if (kind === "jwt") return { text: id ? `JWT “${id}”` : "a JWT", kind: "JWT" };
  if (caller === "admin") return { text: "the operator", kind: "operator" };
  return { text: caller, kind: "caller" };
}

export function Caller({ caller, names }: { caller: string; names: CallerNames }) {
  const { text } = callerLabel(caller, names);
  return (
    <span class="caller" title={caller}>
      {text}
      <span class="skip"> ({caller})</span>
    </span>
  );
}
