import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { getConfig, usageConfigOf } from "./env";

/** Usage recording's settings are read once, validated, like every other setting (docs/usage.md). */
describe("the usage settings", () => {
  it("default when unset and are read as validated values", () => {
    const unset = { ...env, USAGE_FLUSH_MS: undefined, USAGE_RECORDING: undefined, USAGE_LEDGER_BYTES_MAX: undefined };
    expect(getConfig(unset).usage).toEqual({ flushMs: 1000, recording: true, ledgerBytesMax: 5 * 1024 ** 3 });
    const set = { ...env, USAGE_FLUSH_MS: "0", USAGE_RECORDING: "off", USAGE_LEDGER_BYTES_MAX: "1048576" };
    expect(getConfig(set).usage).toEqual({ flushMs: 0, recording: false, ledgerBytesMax: 1048576 });
    // The ledger's Durable Object reads the same part alone, with no other setting.
    expect(usageConfigOf({ USAGE_LEDGER_BYTES_MAX: "1048576" } as Env)).toEqual({
      flushMs: 1000,
      recording: true,
      ledgerBytesMax: 1048576,
    });
  });

  it("refuse a malformed value by name, never falling back in silence", () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    expect(() => getConfig({ ...env, USAGE_FLUSH_MS: "soon" })).toThrow(/USAGE_FLUSH_MS is not a number/);
    expect(() => getConfig({ ...env, USAGE_RECORDING: "no" })).toThrow(/USAGE_RECORDING must be "on" or "off"/);
    expect(() => usageConfigOf({ USAGE_LEDGER_BYTES_MAX: "-1" } as Env)).toThrow(/USAGE_LEDGER_BYTES_MAX/);
    log.mockRestore();
  });
});
