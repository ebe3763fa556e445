import { describe, expect, it } from "vitest";
import { ApiError } from "../platform/errors";
import { cancelAfter, durationText, preferencesOf, waitPreference } from "./preferences";

const refusal = (work: () => unknown) => {
  try {
    work();
  } catch (error) {
    return error instanceof ApiError ? { code: error.code, errors: error.errors } : error;
  }
  return null;
};

describe("Prefer (RFC 7240)", () => {
  it("reads preferences in order, with token or quoted values, parameters and spaces as the RFC writes them", () => {
    expect(preferencesOf('respond-async, wait=10; foo=bar, handling="lenient", x="a,b"')).toEqual([
      { name: "respond-async", value: null },
      { name: "wait", value: "10" },
      { name: "handling", value: "lenient" },
      { name: "x", value: "a,b" },
    ]);
    expect(preferencesOf("WAIT = 5")).toEqual([{ name: "wait", value: "5" }]);
    expect(preferencesOf('wait="7"')).toEqual([{ name: "wait", value: "7" }]);
  });

  it("skips what does not parse up to the next comma, and goes on", () => {
    expect(preferencesOf('=x, wait 3, "q", wait="unterminated, return=minimal')).toEqual([]);
    expect(preferencesOf("@@, wait=4")).toEqual([{ name: "wait", value: "4" }]);
    expect(preferencesOf(", ,wait=4,")).toEqual([{ name: "wait", value: "4" }]);
  });

  it("wait=N is 1 to 60 seconds: bare wait or an empty value is 60, more is served as 60", () => {
    expect(waitPreference(null)).toBeNull();
    expect(waitPreference("wait=1")).toBe(1);
    expect(waitPreference("wait=60")).toBe(60);
    expect(waitPreference("wait")).toBe(60);
    expect(waitPreference("wait=")).toBe(60);
    expect(waitPreference('wait=""')).toBe(60);
    expect(waitPreference("wait=61")).toBe(60);
    expect(waitPreference("wait=999999999999")).toBe(60);
    expect(waitPreference("respond-async, wait=12")).toBe(12);
  });

  it("ignores every other preference: the run is an ordinary one", () => {
    for (const value of ["respond-async", "return=minimal", "handling=strict", ""])
      expect(waitPreference(value)).toBeNull();
  });

  it.each([
    "wait=0",
    "wait=00",
    "wait=1.5",
    "wait=-3",
    "wait=soon",
    "wait=abc",
    'wait="5s"',
    "respond-async, wait=1e3",
  ])("refuses %j with a 400 naming the Prefer header, as a bad Cancel-After is", (value) => {
    expect(refusal(() => waitPreference(value))).toMatchObject({
      code: "validation_failed",
      errors: [{ location: "header", field: "Prefer" }],
    });
  });

  it("serves a wait of any length past 60 as 60 (RFC 7240 lets a server wait less than asked)", () => {
    expect(waitPreference("wait=9999999999999")).toBe(60);
  });

  it("reads only the first wait when it is given twice (two headers arrive as one comma-joined value)", () => {
    expect(waitPreference("wait=5, wait=50")).toBe(5);
    expect(
      waitPreference(
        new Headers([
          ["prefer", "wait=3"],
          ["prefer", "wait=40"],
        ]).get("prefer"),
      ),
    ).toBe(3);
  });
});

describe("Cancel-After", () => {
  it("takes s, m and h in that order, or bare seconds, as milliseconds after acceptance", () => {
    expect(cancelAfter(null, "sync")).toBeNull();
    expect(cancelAfter("30s", "sync")).toBe(30_000);
    expect(cancelAfter("5m", "sync")).toBe(300_000);
    expect(cancelAfter("2h30m", "sync")).toBe(9_000_000);
    expect(cancelAfter("1h0m5s", "async")).toBe(3_605_000);
    expect(cancelAfter("45", "wait")).toBe(45_000);
    expect(cancelAfter(" 5s ", "wait")).toBe(5_000);
  });

  it("refuses a deadline shorter than 5 s, or longer than the mode's owner can hold, naming the header", () => {
    expect(refusal(() => cancelAfter("4s", "sync"))).toEqual({
      code: "validation_failed",
      errors: [{ location: "header", field: "Cancel-After", message: "must be at least 5s" }],
    });
    expect(cancelAfter("15m", "wait")).toBe(900_000);
    expect(refusal(() => cancelAfter("15m1s", "wait"))).toMatchObject({
      errors: [{ message: "must be at most 15m for a waited run (Prefer: wait)" }],
    });
    expect(cancelAfter("24h", "async")).toBe(86_400_000);
    expect(refusal(() => cancelAfter("25h", "async"))).toMatchObject({
      errors: [{ message: "must be at most 24h for an async run" }],
    });
  });

  it.each(["", "0", "4", "s", "5 m", "5M", "1.5m", "5m2h", "5s5s", "-5s", "5d", "30s, 40s", "9999999999"])(
    "refuses %j with a 400 naming the header",
    (value) => {
      const error = refusal(() => cancelAfter(value, "sync")) as { code: string; errors: { field: string }[] };
      expect(error.code).toBe("validation_failed");
      expect(error.errors[0]!.field).toBe("Cancel-After");
    },
  );

  it("writes durations back as it reads them", () => {
    expect(durationText(9_000_000)).toBe("2h30m");
    expect(durationText(5_000)).toBe("5s");
    expect(durationText(86_400_000)).toBe("24h");
  });
});
