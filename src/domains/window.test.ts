import { describe, expect, it } from "vitest";
import { addDomain, uniqueLabel, validate } from "../../test/domains";
import { seedProject } from "../../test/helpers";
import { HALF_HOUR, read, world } from "../../test/cron-world";

// Its own file, so D1 holds only this test's domain and 98 cron runs stay fast.
describe("the automatic validation window (fake clock)", () => {
  it(
    "attempts every 30 minutes for exactly 2 days, then stops; manual validation still works after",
    async () => {
      const w = world();
      const seed = await seedProject(w.api);
      const name = `${uniqueLabel("window")}.example.test`;
      const created = await addDomain(w.api, seed, name);
      expect(created.body.auto_validation_ends_at).toBe("2026-11-23T12:00:00.000Z");
      // Every tick for 2 days and an hour beyond (the record never appears: it stays pending).
      for (let tick = 1; tick <= 98; tick++) {
        w.api.clock.set(new Date(Date.parse("2026-11-21T12:00:00.000Z") + tick * HALF_HOUR).toISOString());
        await w.cron();
        await w.drainQueue();
      }
      // Ticks 12:30 on day 0 up to 11:30 on day 2: 95 attempts, none at or after the window's end (12:00).
      expect(w.checksOf(name)).toBe(95);
      const after = await read(w.api, seed, name);
      expect(after).toMatchObject({
        status: "pending",
        last_checked_at: "2026-11-23T11:30:00.000Z",
        next_check_at: null,
        last_error: { code: "NO_RECORD" },
      });

      w.dns.set(name, "ok");
      const manual = await validate(w.api, seed, name);
      expect(manual.body).toMatchObject({ status: "validated", validated_at: "2026-11-23T13:00:00.000Z" });
    },
    30_000 /* 98 cron runs, each a few D1 round trips: slow on a loaded machine */,
  );
});
