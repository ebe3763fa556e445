import { invalidField } from "../platform/errors";
import type { RunMode } from "./outcome";

/**
 * The two request headers that decide how long a run may take and who waits for it: `Prefer: wait=N`
 * (RFC 7240) and `Cancel-After` (a deadline counted from acceptance). Both are read only when present,
 * so a run without them pays one header lookup each.
 */

/** The longest a caller may wait for an answer before the run is handed over (`Prefer: wait=60`, and bare `wait`). */
export const WAIT_MAX_SECONDS = 60;

const TOKEN = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;

/**
 * The preferences of a `Prefer` field value (RFC 7240 section 2), in order: each `token [= word]`, its
 * parameters after `;` read and ignored. Lenient as the RFC asks: a preference that does not parse is
 * skipped up to the next comma rather than refusing the request (a server ignores what it does not
 * understand). An empty value is the same as none (section 2).
 */
export function preferencesOf(value: string): { name: string; value: string | null }[] {
  const found: { name: string; value: string | null }[] = [];
  let i = 0;
  const n = value.length;
  const skipSpace = () => {
    while (i < n && (value[i] === " " || value[i] === "\t")) i++;
  };
  const token = () => {
    const start = i;
    while (i < n && TOKEN.test(value[i]!)) i++;
    return value.slice(start, i);
  };
  /** A token or a quoted-string (with its escapes undone); `null` when neither is there. */
  const word = (): string | null => {
    if (value[i] !== '"') {
      const t = token();
      return t === "" ? null : t;
    }
    let text = "";
    for (i++; i < n; i++) {
      const c = value[i]!;
      if (c === '"') {
        i++;
        return text;
      }
      if (c === "\\" && i + 1 < n) i++;
      text += value[i];
    }
    return null; // unterminated
  };
  /** Skips to just after the next comma outside a quoted-string. */
  const skipPreference = () => {
    let quoted = false;
    for (; i < n; i++) {
      const c = value[i];
      if (quoted && c === "\\") i++;
      else if (c === '"') quoted = !quoted;
      else if (!quoted && c === ",") {
        i++;
        return;
      }
    }
  };
  while (i < n) {
    skipSpace();
    const name = token();
    if (name === "") {
      skipPreference();
      continue;
    }
    skipSpace();
    let pref: string | null = null;
    let ok = true;
    if (value[i] === "=") {
      i++;
      skipSpace();
      // `wait=` is a preference with an empty value: the same as none.
      if (i < n && value[i] !== "," && value[i] !== ";") {
        pref = word();
        ok = pref !== null;
      }
      skipSpace();
    }
    // Parameters (`; name[=word]`) are not used by any preference read here: skipped with the rest.
    if (ok && (i >= n || value[i] === "," || value[i] === ";")) found.push({ name: name.toLowerCase(), value: pref });
    skipPreference();
  }
  return found;
}

/**
 * How many seconds the caller will wait (`Prefer: wait=N`), or `null` for a run that does not wait.
 * Only the first `wait` counts (RFC 7240: a preference given twice is read once). Bare `wait` (or an
 * empty value) is 60; a value past 60 is served as 60, and `Preference-Applied` says so (RFC 7240
 * section 4.3 lets a server wait less than asked). RFC 7240 has a server ignore preferences it does not
 * know, and this one does; but a `wait` whose value is no whole number of seconds from 1 up
 * (`wait=0`, `wait=1.5`, `wait=soon`) is the caller's mistake about a preference the gateway serves:
 * run as a plain synchronous run, a hang-up would end it, so it is a 400 naming the header, as a bad
 * `Cancel-After` is, before the app is called.
 */
export function waitPreference(header: string | null): number | null {
  if (header === null) return null;
  const wait = preferencesOf(header).find((p) => p.name === "wait");
  if (wait === undefined) return null;
  if (wait.value === null || wait.value === "") return WAIT_MAX_SECONDS;
  if (!/^\d+$/.test(wait.value) || /^0+$/.test(wait.value))
    throw invalidField(
      "header",
      "Prefer",
      `wait must be a whole number of seconds from 1 to ${WAIT_MAX_SECONDS} (e.g. "wait=10"), not "${wait.value.slice(0, 32)}"`,
    );
  return Math.min(Number(wait.value), WAIT_MAX_SECONDS);
}

/** The shortest deadline a run takes (Replicate's minimum). */
export const CANCEL_AFTER_MIN_MS = 5_000;

/**
 * The longest deadline of each mode: what its owner can hold a run for, counted from acceptance.
 * - sync: the Worker serving the caller has no wall-clock limit while the caller stays connected; a day
 *   bounds a deadline nobody means.
 * - wait: the keeper holds its run by its alarm, 15 minutes of wall time per alarm (docs/runs.md); a
 *   handed-over run's call is also bounded by `ASYNC_RUN_TIMEOUT_MS`, as an async run's is.
 * - async: a queued run expires 24 hours after acceptance (runs/async/sweep.ts); its call is bounded by
 *   `ASYNC_RUN_TIMEOUT_MS` (a queue consumer has 15 minutes).
 */
export const CANCEL_AFTER_MAX_MS: Record<RunMode, number> = {
  sync: 24 * 3600_000,
  wait: 15 * 60_000,
  async: 24 * 3600_000,
};

const MODE_NAMES: Record<RunMode, string> = {
  sync: "a synchronous run",
  wait: "a waited run (Prefer: wait)",
  async: "an async run",
};

const DURATION = /^(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?$/;

/** `2h30m` for 9,000,000 ms: how a deadline is written back in messages. */
export function durationText(ms: number): string {
  const s = Math.floor(ms / 1000);
  const parts = [[Math.floor(s / 3600), "h"] as const, [Math.floor(s / 60) % 60, "m"] as const, [s % 60, "s"] as const];
  const text = parts
    .filter(([v]) => v > 0)
    .map(([v, u]) => `${v}${u}`)
    .join("");
  return text || "0s";
}

/**
 * The run's deadline (`Cancel-After`) in milliseconds after acceptance, or `null` without the header:
 * `30s`, `5m`, `2h30m` (hours, minutes, seconds in that order, each once) or bare seconds (`45`);
 * at least 5 s, at most the mode's `CANCEL_AFTER_MAX_MS`. Anything else is a 400 naming the header,
 * before the app is called.
 */
export function cancelAfter(header: string | null, mode: RunMode): number | null {
  if (header === null) return null;
  const bad = (message: string) => invalidField("header", "Cancel-After", message);
  const text = header.trim();
  let ms: number;
  if (/^\d{1,9}$/.test(text)) ms = Number(text) * 1000;
  else {
    const parts = text === "" ? null : DURATION.exec(text);
    if (parts === null)
      throw bad(
        text.includes(",")
          ? "must be given once"
          : 'must be a duration such as "30s", "5m", "2h30m", or a whole number of seconds',
      );
    const [, h, m, s] = parts;
    ms = (Number(h ?? 0) * 3600 + Number(m ?? 0) * 60 + Number(s ?? 0)) * 1000;
  }
  if (ms < CANCEL_AFTER_MIN_MS) throw bad(`must be at least ${durationText(CANCEL_AFTER_MIN_MS)}`);
  const max = CANCEL_AFTER_MAX_MS[mode];
  if (ms > max) throw bad(`must be at most ${durationText(max)} for ${MODE_NAMES[mode]}`);
  return ms;
}
