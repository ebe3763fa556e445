import { seg } from "../api";
import type { DomainItem } from "../api-types";
import { Badge, type BadgeTone, CopyValue, Csrf, DataTable, when } from "../components";
import { projectPath } from "../context";

const STATUS_TONE: Record<DomainItem["status"], BadgeTone> = { pending: "info", validated: "ok", failed: "bad" };
export const STATUS_LABEL: Record<DomainItem["status"], string> = {
  pending: "Pending",
  validated: "Validated",
  failed: "Failed",
};
const CERTIFICATE_LABEL: Record<DomainItem["certificate_status"], string> = {
  none: "Not requested yet (after validation)",
  pending: "Being issued",
  active: "Active",
  failed: "Failed: Validate Domain asks again",
};

/** Why no automatic attempt is planned (the API plans them only for a pending domain within its window). */
const NO_NEXT_CHECK: Record<DomainItem["status"], string> = {
  validated: "none needed",
  failed: "none while it is failed: correct the record, then Validate Domain",
  pending: "none: automatic attempts have ended",
};

export const StatusBadge = ({ domain }: { domain: DomainItem }) => (
  <Badge tone={STATUS_TONE[domain.status]}>{STATUS_LABEL[domain.status]}</Badge>
);

export const domainPath = (pid: string, name: string, rest = "") => projectPath(pid, `/domains/${seg(name)}${rest}`);

/** The record to create at the DNS provider, each part copyable; for an apex, what to use instead of a CNAME. */
export function DnsRecord({ domain, idPrefix }: { domain: DomainItem; idPrefix: string }) {
  const r = domain.dns_record;
  const o = domain.ownership_record;
  const proof = domain.ownership_required && domain.status !== "validated";
  return (
    <>
      <DataTable
        caption={
          <>
            DNS {proof ? "records" : "record"} to create for {domain.domain}
          </>
        }
        columns={["Type", "Name", "Value (target)"]}
        class="record cards"
      >
        <tr>
          <td data-label="Type">
            <code>{r.type}</code>
          </td>
          <td data-label="Name">
            <CopyValue id={`${idPrefix}-name`} value={r.name} label="record name" />
          </td>
          <td data-label="Value (target)">
            <CopyValue id={`${idPrefix}-value`} value={r.value} label="record value" />
          </td>
        </tr>
        {proof && (
          <tr>
            <td data-label="Type">
              <code>{o.type}</code>
            </td>
            <td data-label="Name">
              <CopyValue id={`${idPrefix}-txt-name`} value={o.name} label="ownership record name" />
            </td>
            <td data-label="Value (target)">
              <CopyValue id={`${idPrefix}-txt-value`} value={o.value} label="ownership record value" />
            </td>
          </tr>
        )}
      </DataTable>
      {proof && (
        <p class="hint" id={`${idPrefix}-ownership`}>
          <strong>Ownership record required.</strong> Another project also claims {domain.domain}, or held it in the
          last 30 days, so the {r.type} alone does not prove it is yours: create the <code>TXT</code> record as well (it
          is unique to this domain), then Validate Domain. Once validated here, every other claim on {domain.domain}{" "}
          ends.
        </p>
      )}
      {r.type === "ALIAS" ? (
        <p class="hint">
          <strong>{domain.domain} is an apex</strong> (the zone's own name), which cannot hold a CNAME. Create an{" "}
          <code>ALIAS</code> record, called <code>ANAME</code> or “CNAME flattening” by some providers, pointing at the
          value above. If your provider has none, use a subdomain such as <code>www.{domain.domain}</code> instead.
        </p>
      ) : (
        <p class="hint">
          Create a <code>CNAME</code> record and remove any other record (A, AAAA, another CNAME) at that name. Some
          providers want only the part before your zone in the Name field.
        </p>
      )}
    </>
  );
}

/** The validation status: the dialog's content and the no-script page's, the same facts in the same order. */
export function StatusFacts({ domain, now }: { domain: DomainItem; now: number }) {
  const windowEnded = Date.parse(domain.auto_validation_ends_at) <= now;
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        <StatusBadge domain={domain} />
        {domain.validated_at && <> since {when(domain.validated_at)}</>}
      </dd>
      <dt>Last error</dt>
      <dd>
        {domain.last_error ? (
          <>
            <code>{domain.last_error.code}</code>: {domain.last_error.message}
          </>
        ) : (
          <span class="muted">none</span>
        )}
      </dd>
      <dt>Last attempt</dt>
      <dd>{when(domain.last_checked_at)}</dd>
      <dt>Next automatic attempt</dt>
      <dd>
        {/* The API keeps a planned time the cron has not reached yet; past the window, none will come. */}
        {domain.next_check_at && !windowEnded ? (
          when(domain.next_check_at)
        ) : (
          <span class="muted">{NO_NEXT_CHECK[domain.status]}</span>
        )}
      </dd>
      <dt>Automatic attempts end</dt>
      <dd>
        {when(domain.auto_validation_ends_at)}
        {windowEnded && domain.status !== "validated" && <span class="muted"> (ended: use Validate Domain)</span>}
      </dd>
      <dt>Certificate</dt>
      <dd>{CERTIFICATE_LABEL[domain.certificate_status]}</dd>
    </dl>
  );
}

export function ValidateForm({ pid, domain, csrf }: { pid: string; domain: DomainItem; csrf: string }) {
  return (
    <form method="post" action={domainPath(pid, domain.domain, "/validate")} class="inline">
      <Csrf token={csrf} />
      <button type="submit">
        Validate Domain<span class="skip"> {domain.domain}</span>
      </button>
    </form>
  );
}

/** What a manual validation found, said first on the page it returns to. */
export function CheckResult({ domain }: { domain: DomainItem }) {
  if (domain.status === "validated") {
    return (
      <div class="alert success" role="status">
        <p>
          <strong>Validated.</strong> {domain.domain} points at us; it is served once its certificate is active.
        </p>
      </div>
    );
  }
  return (
    <div class="alert error" role="alert">
      <p>
        <strong>Not validated: {STATUS_LABEL[domain.status]}.</strong>{" "}
        {domain.last_error ? (
          <>
            <code>{domain.last_error.code}</code>: {domain.last_error.message}
          </>
        ) : (
          "The check found nothing to report; try again in a few minutes."
        )}
      </p>
    </div>
  );
}
