// The baseline Worker: forwards every request to the upstream and returns its answer untouched.
// Whatever the gateway costs is measured against this, in the same runtime.
export const passthroughScript = (upstream) => `
const UPSTREAM = ${JSON.stringify(upstream)};
export default {
  async fetch(request) {
    const url = new URL(request.url);
    return fetch(UPSTREAM + url.pathname + url.search, { method: request.method, headers: request.headers, body: request.body });
  },
};
`;
