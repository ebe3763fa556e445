#!/usr/bin/env bash
# From nothing to a cancelled build, against `npm run dev` (README, Quickstart). Stops at the first
# step that fails and says why (the status and the problem the API answered); never goes on with an
# empty id. API and ADMIN_TOKEN may be set from outside; by default the local `npm run dev`.
set -euo pipefail
API=${API:-http://localhost:8787/v2}
ADMIN_TOKEN=${ADMIN_TOKEN:-$(grep -s '^ADMIN_TOKEN=' .dev.vars | cut -d= -f2 || true)}
[ -n "$ADMIN_TOKEN" ] || { echo "quickstart: no ADMIN_TOKEN (run npm run dev once, or export it)" >&2; exit 1; }

# call TOKEN METHOD PATH [JSON]: the answer's body; stops with the status and problem unless it is 2xx.
call() {
  local args=(-sS -X "$2" -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -w '\n%{http_code}')
  [ $# -ge 4 ] && args+=(-d "$4")
  local out
  out=$(curl "${args[@]}" "$API$3") || { echo "quickstart: $2 $3: no answer from $API (is npm run dev running?)" >&2; exit 1; }
  local status=${out##*$'\n'} body=${out%$'\n'*}
  [[ $status == 2* ]] || { echo "quickstart: $2 $3 answered $status: $body" >&2; exit 1; }
  printf '%s\n' "$body"
}
# field NAME: that field of the JSON on stdin; stops when it is missing (nothing on stdin: call said why).
field() {
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    if (!s) process.exit(1);
    let v;
    try { v = JSON.parse(s)[process.argv[1]]; } catch { v = undefined; }
    if (v === undefined || v === null) { console.error(`quickstart: no "${process.argv[1]}" in ${s}`); process.exit(1); }
    console.log(v);
  });' "$1"
}

echo "1. The operator creates a project."
PROJECT=$(call "$ADMIN_TOKEN" POST /projects '{"name":"quickstart"}' | field project_id)

echo "2. A service account for it (API Keys): the token is shown once."
EXPIRES=$(node -p 'new Date(Date.now() + 90 * 864e5).toISOString()')   # in 90 days
TOKEN=$(call "$ADMIN_TOKEN" POST "/projects/$PROJECT/service-accounts" \
  "{\"name\":\"ci\",\"expires_at\":\"$EXPIRES\"}" | field token)

echo "3. An app, and a build of it (status \"queued\")."
APP=$(call "$TOKEN" POST "/projects/$PROJECT/apps" '{"name":"hello","region":"us-east-1","runtime":"cortex"}' | field app_id)
BUILD=$(call "$TOKEN" POST "/projects/$PROJECT/apps/$APP/builds" '{}' | field build_id)

echo "4. Cancel it: 200, status \"cancelled\". Again: the same 200 (cancelling is idempotent)."
call "$TOKEN" DELETE "/projects/$PROJECT/apps/$APP/builds/$BUILD"
call "$TOKEN" DELETE "/projects/$PROJECT/apps/$APP/builds/$BUILD"
