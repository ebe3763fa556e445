// Values the globalSetup files (test/global/*.mjs) hand to the workers project's configuration.
declare module "vitest" {
  export interface ProvidedContext {
    dohUrl: string;
    fakesUrl: string;
    oidcIssuer: string;
    oidcOtherIssuer: string;
    openaiPeerUrl: string;
    zonesDohUrl: string;
    zonesUrl: string;
  }
}
export {};
