/** See dns-harness.mjs: a DoH server answering at `url` (the harness, started when needed); resolves to the URL. */
export function ensureDnsHarness(url?: string): Promise<string>;
export default function setup(project: { provide(key: string, value: unknown): void }): Promise<void>;
