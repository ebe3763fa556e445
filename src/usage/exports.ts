/**
 * The runs list and the usage series as files (docs/usage.md "Exports"): CSV (RFC 4180) or NDJSON,
 * chosen by `Accept`, streamed a page at a time so an export of any range the API allows never sits
 * whole in the isolate's 128 MB. Mechanism only: which rows, and how many, the handlers decide.
 */

export const CSV = "text/csv; charset=utf-8; header=present";
export const NDJSON = "application/x-ndjson";
export type ExportFormat = "csv" | "ndjson";

/** The media types a list or series may be asked in; JSON (the API's own answer) first. */
export const EXPORT_TYPES = ["application/json", "text/csv", "application/x-ndjson"] as const;
export const formatOf = (type: string): ExportFormat | null =>
  type === "text/csv" ? "csv" : type === "application/x-ndjson" ? "ndjson" : null;

type Cell = string | number | boolean | null;

/**
 * One CSV field as RFC 4180 writes it: quoted when it holds a quote, a comma or a line break, its quotes
 * doubled. A text that a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, a tab or a carriage
 * return first: OWASP's CSV injection) gets a leading `'`, so a caller's path or subject such as
 * `=HYPERLINK(…)` opens as text; numbers are written as they are.
 */
export function csvField(value: Cell): string {
  if (value === null) return "";
  if (typeof value !== "string") return String(value);
  const text = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** A CSV record with its CRLF (RFC 4180 section 2). */
export const csvLine = (cells: readonly Cell[]) => `${cells.map(csvField).join(",")}\r\n`;

/**
 * A stream of rows: the header (CSV), then each page `next` gives, until it gives `null`. A page is
 * read only when the reader wants more (pull), so a slow reader holds one page, never the range.
 */
export function exportStream<T>(
  format: ExportFormat,
  columns: readonly { name: string; of: (row: T) => Cell }[],
  json: (row: T) => unknown,
  next: () => Promise<T[] | null>,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let started = false;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (!started && format === "csv") {
          started = true;
          controller.enqueue(encoder.encode(csvLine(columns.map((c) => c.name))));
          return;
        }
        started = true;
        const page = await next();
        if (page === null) {
          controller.close();
          return;
        }
        const text =
          format === "csv"
            ? page.map((row) => csvLine(columns.map((c) => c.of(row)))).join("")
            : page.map((row) => `${JSON.stringify(json(row))}\n`).join("");
        controller.enqueue(encoder.encode(text));
      },
    },
    { highWaterMark: 0 },
  );
}

/** The headers of an export: its type, a file name a browser saves it as, not cached. */
export function exportHeaders(format: ExportFormat, filename: string): Record<string, string> {
  return {
    "Content-Type": format === "csv" ? CSV : NDJSON,
    "Content-Disposition": `attachment; filename="${filename}.${format === "csv" ? "csv" : "ndjson"}"`,
    "Cache-Control": "no-store",
    Vary: "Accept",
  };
}
