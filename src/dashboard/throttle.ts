import { addressKey } from "../platform/address";
/**
 * Sign-in throttling per client IP, kept in D1 so every isolate and location shares the count (an
 * in-memory counter would reset with each isolate). A fixed window: at most MAX_ATTEMPTS sign-in
 * attempts per IP per window; a successful sign-in clears the IP's count.
 *
 * The window is short on purpose: the admin token is at least 32 random characters, so guessing it
 * is hopeless at any rate a throttle allows, and a long lockout would mostly lock out the operator
 * who mistyped (with the right token refused for 15 minutes, as it was). What the throttle is for is
 * keeping scripted guessing slow and noisy; a minute does that, and is stated to the person locked out.
 */
export const MAX_ATTEMPTS = 5;
export const WINDOW_MS = 60 * 1000;

/** "42 seconds", "1 minute": how long until the window ends, as the sign-in page says it. */
export function waitText(seconds: number): string {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? "" : "s"}`;
  const minutes = Math.ceil(seconds / 60);
  return `${minutes} minute${minutes === 1 ? "" : "s"}`;
}

export type ThrottleResult = { allowed: true; remaining: number } | { allowed: false; retryAfterSeconds: number };

/**
 * Counts one attempt before the credential is even compared, in one atomic upsert, so concurrent
 * guesses cannot slip past the limit: attempt MAX_ATTEMPTS + 1 of a window is refused unchecked.
 */
export async function countSignInAttempt(db: D1Database, ip: string, now: number): Promise<ThrottleResult> {
  const windowStart = now - WINDOW_MS;
  // Ended windows are dropped on the way, so the table holds at most the IPs of one window.
  const [, upsert] = await db.batch<{ attempts: number; window_started_at: number }>([
    db.prepare("DELETE FROM sign_in_attempts WHERE window_started_at <= ?1").bind(windowStart),
    db
      .prepare(
        `INSERT INTO sign_in_attempts (ip, attempts, window_started_at) VALUES (?1, 1, ?2)
       ON CONFLICT (ip) DO UPDATE SET
         attempts = CASE WHEN window_started_at <= ?3 THEN 1 ELSE attempts + 1 END,
         window_started_at = CASE WHEN window_started_at <= ?3 THEN ?2 ELSE window_started_at END
       RETURNING attempts, window_started_at`,
      )
      .bind(ip, now, windowStart),
  ]);
  const row = upsert?.results[0];
  if (!row || row.attempts <= MAX_ATTEMPTS) return { allowed: true, remaining: MAX_ATTEMPTS - (row?.attempts ?? 1) };
  return {
    allowed: false,
    retryAfterSeconds: Math.max(1, Math.ceil((row.window_started_at + WINDOW_MS - now) / 1000)),
  };
}

/** After a successful sign-in. */
export async function clearAttempts(db: D1Database, ip: string): Promise<void> {
  await db.prepare("DELETE FROM sign_in_attempts WHERE ip = ?1").bind(ip).run();
}

/**
 * The key the client's address is throttled under, as Cloudflare reports the address (an IPv6 one by
 * its /64: `addressKey`); one shared bucket when it is absent (local tools).
 */
export const clientIp = (headers: Headers) => {
  const ip = headers.get("cf-connecting-ip")?.trim();
  return ip ? addressKey(ip) : "unknown";
};
