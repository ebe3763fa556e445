#!/bin/bash
# scripts/dns-harness/start.sh - loopback DNS-over-HTTPS (RFC 8484, plain HTTP) test harness.
#
#   knotd   (Debian "knot")    authoritative server for the test zones, 127.0.0.1:$AUTH_PORT UDP+TCP
#   dnsdist (Debian "dnsdist") DoH front end, plain HTTP/1.1 + h2c, http://127.0.0.1:$DOH_PORT/dns-query
#   json-shim.py (stdlib only) optional JSON API (application/dns-json), http://127.0.0.1:$JSON_PORT/dns-query
#
# Idempotent: installs missing packages, stops what an earlier run of this script
# started (by PID file), rewrites every config/zone file under $HARNESS_DIR,
# starts everything again, waits until DoH answers, prints the DoH URL on stdout
# (all other messages go to stderr).  Listens on 127.0.0.1 only.
#
# Environment (defaults): HARNESS_DIR=${TMPDIR:-/tmp}/dns-harness AUTH_PORT=5300 DOH_PORT=8053
#   JSON_PORT=8054 JSON_SHIM=1 (0 = do not start the JSON shim)
# Extra zones: drop NAME.zone files into $HARNESS_DIR/zones.d/ (kept across runs).
set -euo pipefail
T0=$(date +%s%N)
DIR=${HARNESS_DIR:-${TMPDIR:-/tmp}/dns-harness}
AUTH_PORT=${AUTH_PORT:-5300}
DOH_PORT=${DOH_PORT:-8053}
JSON_PORT=${JSON_PORT:-8054}
JSON_SHIM=${JSON_SHIM:-1}
ADDR=127.0.0.1                      # never anything but loopback
RUN=$DIR/run LOGS=$DIR/logs PIDS=$DIR/pids ZONES=$DIR/zones EXTRA=$DIR/zones.d

log() { echo "[dnsharness] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
mkdir -p "$DIR" "$RUN/db" "$LOGS" "$PIDS" "$ZONES" "$EXTRA"
exec 9> "$DIR/.lock"                # one start.sh/stop.sh at a time
flock -w 120 9 || die "another start.sh/stop.sh holds $DIR/.lock"

# ---------------------------------------------------------------- 1. packages
PY=
if [ "$JSON_SHIM" = 1 ]; then
  for p in /usr/bin/python3 "$(command -v python3 || true)"; do [ -x "$p" ] && { PY=$p; break; }; done
fi
need=()
[ -x /usr/sbin/knotd ]   || need+=(knot)
[ -x /usr/bin/kdig ]     || need+=(knot-dnsutils)
[ -x /usr/bin/dnsdist ]  || need+=(dnsdist)
[ -x /usr/bin/drill ]    || need+=(ldnsutils)
[ -x /usr/bin/curl ]     || need+=(curl)
[ "$JSON_SHIM" = 1 ] && [ -z "$PY" ] && need+=(python3-minimal)
if ((${#need[@]})); then
  # root installs; a user with passwordless sudo (a CI runner) installs through it; anyone else is told what to install
  ROOT=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && ROOT=(sudo -n) ||
      die "missing ${need[*]}: install them (Debian/Ubuntu: sudo apt-get install -y ${need[*]}; elsewhere knot, dnsdist, ldns and curl from your package manager) and run again"
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "missing ${need[*]} and no apt-get: install knot, dnsdist, ldns and curl from your package manager and run again"
  log "installing Debian packages: ${need[*]}"
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    # keep the packages' own system services (port 53 on 127.0.0.1 and ::1) from starting
    "${ROOT[@]}" sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'; made_policy=1
  fi
  rc=0
  { "${ROOT[@]}" apt-get update -qq && "${ROOT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${need[@]}"; } > "$LOGS/apt.log" 2>&1 || rc=$?
  [ "$made_policy" = 1 ] && "${ROOT[@]}" rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { tail -20 "$LOGS/apt.log" >&2; die "apt-get failed (see $LOGS/apt.log)"; }
  [ "$JSON_SHIM" = 1 ] && [ -z "$PY" ] && PY=/usr/bin/python3
fi

# ------------------------------------------- 2. stop what an earlier run started
alive() {  # pid exists and is not a zombie
  local st
  [[ "$1" =~ ^[0-9]+$ ]] && st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }; [ "${st%% *}" != Z ]
}
running() {  # alive, and one of ours: its command line names $DIR
  local cmd
  alive "$1" && cmd=$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null) && [[ "$cmd" == *"$DIR/"* ]]
}
stop_ours() {
  local name f pid i
  for name in json-shim dnsdist knot; do
    f=$PIDS/$name.pid; [ -f "$f" ] || continue
    pid=$(cat "$f")
    if running "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 50); do running "$pid" || break; sleep 0.1; done
      running "$pid" && kill -KILL "$pid" 2>/dev/null || true
      log "stopped $name (pid $pid)"
    fi
    rm -f "$f"
  done
}
stop_ours
# from here on, a failed start leaves nothing of ours running
trap 'rc=$?; if [ "$rc" != 0 ]; then stop_ours; log "start failed; stopped what had been started"; fi' EXIT

port_busy() {  # $1 = port: something listens on 127.0.0.1/any address (TCP; UDP too when ss exists)
  if command -v ss >/dev/null; then
    [ -n "$(ss -Hlntu "sport = :$1" 2>/dev/null)" ]
  else
    (exec 3<>"/dev/tcp/$ADDR/$1") 2>/dev/null
  fi
}
ports=("$AUTH_PORT" "$DOH_PORT"); [ "$JSON_SHIM" = 1 ] && ports+=("$JSON_PORT")
for p in "${ports[@]}"; do
  port_busy "$p" && die "port $p is already in use by another program (set AUTH_PORT/DOH_PORT/JSON_PORT)"
done

# ------------------------------------------------------------- 3. zone files
# Test zones.  knotd refuses CNAME-and-other-data and multiple CNAMEs at a name
# (RFC 1034 3.6.2, RFC 2181 10.1) unless semantic-checks is "soft", which this
# harness uses so that it can also serve such broken zones (logged as notices).
cat > "$ZONES/example.test.zone" <<'EOF'
$ORIGIN example.test.
$TTL 60
@            IN SOA   ns1.example.test. hostmaster.example.test. 1 3600 600 86400 30
@            IN NS    ns1.example.test.
ns1          IN A     127.0.0.1

; correct: the customer hostname is CNAMEd to our service
good         IN CNAME proxy.aws.us-east-1.service.test.

; wrong target: still pointing at another provider / a typo / another region
wrong        IN CNAME elsewhere.test.

; conflict: CNAME plus other data at one name (forbidden by RFC 1034 3.6.2).
; Happens with lenient zone editors/servers or merged zone imports.  Every
; query type except ANY gets only the CNAME (it shadows the rest); ANY gets one
; RRset, the A (knotd answers ANY minimally, RFC 8482).
conflict     IN CNAME proxy.aws.us-east-1.service.test.
conflict     IN A     203.0.113.50
conflict     IN TXT   "site-verification=abc123"

; A/AAAA where a CNAME is expected: the customer pointed the name at IP
; addresses (old host, or copied our IPs) instead of CNAMEing it.
a-instead    IN A     203.0.113.50
a-instead    IN A     203.0.113.51
a-instead    IN AAAA  2001:db8:bad::50

; two CNAMEs at one name (forbidden by RFC 2181 10.1), one right, one wrong
multi-cname  IN CNAME proxy.aws.us-east-1.service.test.
multi-cname  IN CNAME elsewhere.test.

; indirect: CNAME to the customer's own alias, which CNAMEs to us
chain        IN CNAME alias.example.test.
alias        IN CNAME proxy.aws.us-east-1.service.test.

; wildcard: any <label>.wild.example.test gets a synthesised CNAME to us
*.wild       IN CNAME proxy.aws.us-east-1.service.test.

; only unrelated data at the name (CNAME query: NODATA)
txt-only     IN TXT   "v=spf1 -all"

; empty non-terminal: ent.example.test has no records itself (NODATA, not NXDOMAIN)
host.ent     IN A     192.0.2.80
EOF

cat > "$ZONES/apex.test.zone" <<'EOF'
$ORIGIN apex.test.
$TTL 300
@            IN SOA   ns1.example.test. hostmaster.example.test. 1 3600 600 86400 30
@            IN NS    ns1.example.test.
; A zone apex cannot hold a CNAME (SOA and NS live there), so a provider that
; "flattens" a CNAME (Cloudflare CNAME flattening, Route 53 ALIAS, ANAME)
; publishes the target's addresses: CNAME query -> NODATA, A query -> these.
@            IN A     192.0.2.10
@            IN A     192.0.2.11
@            IN AAAA  2001:db8::10
www          IN CNAME proxy.aws.us-east-1.service.test.
EOF

cat > "$ZONES/service.test.zone" <<'EOF'
$ORIGIN service.test.
$TTL 300
@                    IN SOA  ns1.example.test. hostmaster.example.test. 1 3600 600 86400 30
@                    IN NS   ns1.example.test.
proxy.aws.us-east-1  IN A    192.0.2.10
proxy.aws.us-east-1  IN A    192.0.2.11
proxy.aws.us-east-1  IN AAAA 2001:db8::10
EOF

cat > "$ZONES/elsewhere.test.zone" <<'EOF'
$ORIGIN elsewhere.test.
$TTL 300
@            IN SOA   ns1.example.test. hostmaster.example.test. 1 3600 600 86400 30
@            IN NS    ns1.example.test.
@            IN A     203.0.113.50
EOF

# --------------------------------------------------------------- 4. configs
zones=(example.test apex.test service.test elsewhere.test)
{
  cat <<EOF
# generated by $DIR/start.sh - edits are overwritten
server:
    rundir: "$RUN"
    listen: $ADDR@$AUTH_PORT
    udp-workers: 2
    tcp-workers: 2
    background-workers: 1
control:
    listen: "$RUN/knot.sock"
log:
  - target: stderr
    any: info
database:
    storage: "$RUN/db"
template:
  - id: default
    storage: "$ZONES"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    semantic-checks: soft
zone:
EOF
  builtin=("${zones[@]}"); zones=()
  for z in "${builtin[@]}"; do     # a zones.d file of the same name replaces a built-in zone
    [ -f "$EXTRA/$z.zone" ] || { echo "  - domain: $z."; zones+=("$z"); }
  done
  for f in "$EXTRA"/*.zone; do
    [ -f "$f" ] || continue
    z=$(basename "$f" .zone)
    printf '  - domain: %s.\n    file: "%s"\n' "$z" "$f"
    zones+=("$z")
  done
} > "$DIR/knot.conf"
/usr/sbin/knotc -c "$DIR/knot.conf" conf-check >/dev/null 2>"$LOGS/knot-conf-check.log" \
  || { cat "$LOGS/knot-conf-check.log" >&2; die "invalid knot.conf"; }

cat > "$DIR/dnsdist.conf" <<EOF
-- generated by $DIR/start.sh - edits are overwritten
setSecurityPollSuffix("")          -- no security-status lookups on the Internet
setACL({"127.0.0.0/8"})
newServer({address="$ADDR:$AUTH_PORT", source="$ADDR", name="knotd",
           checkName="example.test.", checkType="SOA", mustResolve=true, checkInterval=1})
-- no certificate and key: dnsdist serves DoH over plain HTTP (HTTP/1.1, and h2c)
addDOHLocal("$ADDR:$DOH_PORT", nil, nil, {"/dns-query"}, {reusePort=false})
EOF
/usr/bin/dnsdist --check-config -C "$DIR/dnsdist.conf" >"$LOGS/dnsdist-conf-check.log" 2>&1 \
  || { cat "$LOGS/dnsdist-conf-check.log" >&2; die "invalid dnsdist.conf"; }

JSON_URL=; [ "$JSON_SHIM" = 1 ] && JSON_URL=http://$ADDR:$JSON_PORT/dns-query
cat > "$DIR/ports.env" <<EOF
AUTH_PORT=$AUTH_PORT
DOH_PORT=$DOH_PORT
JSON_PORT=$JSON_PORT
DOH_URL=http://$ADDR:$DOH_PORT/dns-query
JSON_URL=$JSON_URL
EOF

cat > "$DIR/json-shim.py" <<'DNSHARNESS_PY_EOF'
#!/usr/bin/python3
"""dnsharness JSON DoH shim (standard library only).

No Debian 12 package serves the JSON DoH API (application/dns-json, the
format of https://cloudflare-dns.com/dns-query?name=..&type=..), so this
small front end provides it for tests.  It does no DNS work of its own:

  * GET /dns-query?name=NAME&type=TYPE[&do=1][&cd=1]   (also /resolve)
      -> builds an RFC 1035 query, POSTs it (RFC 8484) to the real DoH
         server (dnsdist, which forwards to knotd), decodes the reply and
         answers in Cloudflare/Google JSON form (Content-Type
         application/dns-json).
  * GET /dns-query?dns=...  and  POST application/dns-message
      -> relayed byte for byte to the real DoH server, so this one port can
         stand in for cloudflare-dns.com, which serves both forms on one URL.
"""
import argparse
import ipaddress
import json
import secrets
import struct
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TYPES = {
    "A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "HINFO": 13, "MX": 15,
    "TXT": 16, "AAAA": 28, "SRV": 33, "NAPTR": 35, "DNAME": 39, "DS": 43,
    "SSHFP": 44, "RRSIG": 46, "NSEC": 47, "DNSKEY": 48, "NSEC3": 50,
    "TLSA": 52, "SVCB": 64, "HTTPS": 65, "ANY": 255, "CAA": 257,
}
MAX_BODY = 65535


class BadRequest(Exception):
    pass


def encode_name(name):
    name = name.strip()
    if name.endswith("."):
        name = name[:-1]
    out = bytearray()
    if name:
        for label in name.split("."):
            try:
                raw = label.encode("ascii")
            except UnicodeEncodeError:
                raise BadRequest("Invalid query name `%s`." % name)
            if not 0 < len(raw) < 64:
                raise BadRequest("Invalid query name `%s`." % name)
            out.append(len(raw))
            out += raw
    out.append(0)
    if len(out) > 255:
        raise BadRequest("Invalid query name `%s`." % name)
    return bytes(out)


def parse_type(value):
    if value is None or value == "":
        return 1
    v = value.strip().upper()
    if v.isdigit() and 0 < int(v) < 65536:
        return int(v)
    if v.startswith("TYPE") and v[4:].isdigit():
        return int(v[4:])
    if v in TYPES:
        return TYPES[v]
    raise BadRequest("Invalid query type `%s`." % value)


def flag(value):
    return value is not None and value.lower() in ("", "1", "true")


def build_query(name, qtype, do_bit, cd_bit):
    flags = 0x0100 | (0x0010 if cd_bit else 0)  # RD (+CD)
    header = struct.pack("!HHHHHH", secrets.randbits(16), flags, 1, 0, 0, 1)
    question = encode_name(name) + struct.pack("!HH", qtype, 1)
    opt = b"\x00" + struct.pack("!HHBBHH", 41, 1232, 0, 0,
                                 0x8000 if do_bit else 0, 0)
    return header + question + opt


def read_name(msg, off):
    labels, jumped, end, hops = [], False, off, 0
    while True:
        if off >= len(msg):
            raise ValueError("name runs past end of message")
        length = msg[off]
        if length & 0xC0 == 0xC0:
            if not jumped:
                end = off + 2
            off = ((length & 0x3F) << 8) | msg[off + 1]
            jumped, hops = True, hops + 1
            if hops > 64:
                raise ValueError("compression loop")
            continue
        if length == 0:
            if not jumped:
                end = off + 1
            break
        label = msg[off + 1:off + 1 + length]
        labels.append("".join(
            chr(c) if 0x21 <= c <= 0x7E and c not in (0x2E, 0x5C) else "\\%03d" % c
            for c in label))
        off += 1 + length
    return ".".join(labels) + ".", end


def char_strings(rdata):
    out, i = [], 0
    while i < len(rdata):
        n = rdata[i]
        s = rdata[i + 1:i + 1 + n]
        out.append('"' + "".join(
            "\\" + chr(c) if c in (0x22, 0x5C) else chr(c) if 0x20 <= c <= 0x7E
            else "\\%03d" % c for c in s) + '"')
        i += 1 + n
    return out


def rdata_text(msg, rtype, off, rdlen):
    rd = msg[off:off + rdlen]
    if rtype == 1 and rdlen == 4:
        return str(ipaddress.IPv4Address(rd))
    if rtype == 28 and rdlen == 16:
        return str(ipaddress.IPv6Address(rd))
    if rtype in (2, 5, 12, 39):
        return read_name(msg, off)[0]
    if rtype == 15:
        return "%d %s" % (struct.unpack("!H", rd[:2])[0], read_name(msg, off + 2)[0])
    if rtype == 6:
        mname, o = read_name(msg, off)
        rname, o = read_name(msg, o)
        return "%s %s %d %d %d %d %d" % ((mname, rname) + struct.unpack("!IIIII", msg[o:o + 20]))
    if rtype == 16:
        return " ".join(char_strings(rd))
    if rtype == 33:
        prio, weight, port = struct.unpack("!HHH", rd[:6])
        return "%d %d %d %s" % (prio, weight, port, read_name(msg, off + 6)[0])
    if rtype == 257 and rdlen >= 2:
        tlen = rd[1]
        return '%d %s "%s"' % (rd[0], rd[2:2 + tlen].decode("ascii", "replace"),
                               rd[2 + tlen:].decode("ascii", "replace"))
    return "\\# %d %s" % (rdlen, rd.hex())  # RFC 3597 generic form


def decode(msg):
    ident, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", msg[:12])
    off, question = 12, []
    for _ in range(qd):
        name, off = read_name(msg, off)
        qtype, _qclass = struct.unpack("!HH", msg[off:off + 4])
        off += 4
        question.append({"name": name, "type": qtype})
    sections = {}
    for key, count in (("Answer", an), ("Authority", ns), ("Additional", ar)):
        rrs = []
        for _ in range(count):
            name, off = read_name(msg, off)
            rtype, _rclass, ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
            off += 10
            if rtype != 41:  # the OPT pseudo-record is not shown in JSON
                rrs.append({"name": name, "type": rtype, "TTL": ttl,
                            "data": rdata_text(msg, rtype, off, rdlen)})
            off += rdlen
        if rrs:
            sections[key] = rrs
    out = {
        "Status": flags & 0x000F,
        "TC": bool(flags & 0x0200), "RD": bool(flags & 0x0100),
        "RA": bool(flags & 0x0080), "AD": bool(flags & 0x0020),
        "CD": bool(flags & 0x0010), "Question": question,
    }
    out.update(sections)
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def version_string(self):
        return "dnsharness-json-shim"
    upstream = "http://127.0.0.1:8053/dns-query"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

    def send(self, status, body, ctype, extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Access-Control-Allow-Origin", "*")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status, obj, extra=None):
        self.send(status, (json.dumps(obj) + "\n").encode(), "application/dns-json", extra)

    def relay(self, url, data=None, headers=None):
        req = urllib.request.Request(url, data=data, headers=headers or {},
                                     method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, r.read(MAX_BODY), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(MAX_BODY), e.headers

    def path_ok(self):
        path = urlsplit(self.path).path
        if path not in ("/dns-query", "/resolve"):
            self.send(404, b"not found\n", "text/plain")
            return False
        return True

    def do_GET(self):
        if not self.path_ok():
            return
        query = urlsplit(self.path).query
        params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        try:
            if "dns" in params:  # RFC 8484 GET: relay unchanged
                status, body, hdrs = self.relay(self.upstream + "?" + query,
                                                headers={"Accept": "application/dns-message"})
                extra = {"Cache-Control": hdrs["cache-control"]} if hdrs.get("cache-control") else None
                self.send(status, body, hdrs.get("content-type", "application/octet-stream"), extra)
                return
            if "name" not in params:
                raise BadRequest("Missing `name` (JSON API) or `dns` (RFC 8484) parameter.")
            wire = build_query(params["name"], parse_type(params.get("type")),
                               flag(params.get("do")), flag(params.get("cd")))
            status, body, _ = self.relay(self.upstream, data=wire,
                                         headers={"Content-Type": "application/dns-message",
                                                  "Accept": "application/dns-message"})
            if status != 200:
                self.send_json(502, {"error": "upstream DoH answered HTTP %d" % status})
                return
            answer = decode(body)
            ttls = [rr["TTL"] for rr in answer.get("Answer", []) + answer.get("Authority", [])]
            self.send_json(200, answer, {"Cache-Control": "max-age=%d" % (min(ttls) if ttls else 0)})
        except BadRequest as e:
            self.send_json(400, {"error": str(e)})
        except (urllib.error.URLError, OSError) as e:
            self.send_json(502, {"error": "upstream DoH unreachable: %s" % e})
        except (ValueError, struct.error) as e:
            self.send_json(502, {"error": "cannot decode upstream answer: %s" % e})

    do_HEAD = do_GET

    def do_POST(self):
        if not self.path_ok():
            return
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(min(length, MAX_BODY))
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/dns-message":
            self.send_json(415, {"error": "POST needs Content-Type: application/dns-message"})
            return
        try:
            status, body, hdrs = self.relay(self.upstream, data=data,
                                            headers={"Content-Type": "application/dns-message",
                                                     "Accept": "application/dns-message"})
        except (urllib.error.URLError, OSError) as e:
            self.send_json(502, {"error": "upstream DoH unreachable: %s" % e})
            return
        extra = {"Cache-Control": hdrs["cache-control"]} if hdrs.get("cache-control") else None
        self.send(status, body, hdrs.get("content-type", "application/octet-stream"), extra)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8054)
    ap.add_argument("--upstream", default=Handler.upstream)
    args = ap.parse_args()
    if not ipaddress.ip_address(args.listen).is_loopback:
        ap.error("refusing to listen on a non-loopback address")
    Handler.upstream = args.upstream
    srv = ThreadingHTTPServer((args.listen, args.port), Handler)
    srv.daemon_threads = True
    sys.stderr.write("JSON DoH shim on http://%s:%d/dns-query -> %s\n"
                     % (args.listen, args.port, args.upstream))
    sys.stderr.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
DNSHARNESS_PY_EOF

cat > "$DIR/query.sh" <<'DNSHARNESS_SH_EOF'
#!/bin/bash
# dnsharness DoH client: curl sends the request, drill (ldnsutils) decodes the answer.
#   query.sh NAME [TYPE] [get|post|json|h2] [URL]
#   get  : RFC 8484 GET  ?dns=<base64url of the wire query>
#   post : RFC 8484 POST application/dns-message
#   h2   : like get, but HTTP/2 without TLS (curl --http2-prior-knowledge)
#   json : JSON API (?name=&type=, Accept: application/dns-json), JSON shim port
set -euo pipefail
DIR=${HARNESS_DIR:-${TMPDIR:-/tmp}/dns-harness}
[ -f "$DIR/ports.env" ] && . "$DIR/ports.env"
NAME=${1:?usage: query.sh NAME [TYPE] [get|post|json|h2] [URL]}
TYPE=${2:-CNAME}
MODE=${3:-get}
case "$MODE" in
  json) URL=${4:-http://127.0.0.1:${JSON_PORT:-8054}/dns-query} ;;
  *)    URL=${4:-http://127.0.0.1:${DOH_PORT:-8053}/dns-query} ;;
esac

if [ "$MODE" = json ]; then
  curl -sS --max-time 5 -D - -H 'accept: application/dns-json' --get \
       --data-urlencode "name=$NAME" --data-urlencode "type=$TYPE" "$URL" | tr -d '\r'
  exit 0
fi

case "${TYPE^^}" in
  A) T=1 ;; NS) T=2 ;; CNAME) T=5 ;; SOA) T=6 ;; PTR) T=12 ;; MX) T=15 ;; TXT) T=16 ;;
  AAAA) T=28 ;; SRV) T=33 ;; HTTPS) T=65 ;; ANY) T=255 ;; CAA) T=257 ;;
  *) [[ "$TYPE" =~ ^[0-9]+$ ]] && T=$TYPE || { echo "unknown type $TYPE" >&2; exit 2; } ;;
esac

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Wire query: ID 0 (RFC 8484 4.1), flags RD, QDCOUNT 1; QNAME; QTYPE; QCLASS IN.
{
  printf '\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00'
  IFS=. read -ra labels <<< "${NAME%.}"
  for l in "${labels[@]}"; do
    [[ "$l" =~ ^[A-Za-z0-9_*-]{1,63}$ ]] || { echo "unsupported label '$l'" >&2; exit 2; }
    printf "\\x$(printf %02x ${#l})%s" "$l"
  done
  printf "\\x00\\x$(printf %02x $((T >> 8)))\\x$(printf %02x $((T & 255)))\\x00\\x01"
} > "$tmp/q.bin"

case "$MODE" in
  get|h2)
    b64=$(base64 -w0 < "$tmp/q.bin" | tr '+/' '-_' | tr -d '=')
    h2=(); [ "$MODE" = h2 ] && h2=(--http2-prior-knowledge)
    echo "> GET $URL?dns=$b64"
    curl -sS --max-time 5 "${h2[@]}" -D "$tmp/h" -o "$tmp/r.bin" \
         -H 'accept: application/dns-message' "$URL?dns=$b64" ;;
  post)
    echo "> POST $URL ($(stat -c %s "$tmp/q.bin") bytes application/dns-message)"
    curl -sS --max-time 5 -D "$tmp/h" -o "$tmp/r.bin" -H 'content-type: application/dns-message' \
         -H 'accept: application/dns-message' --data-binary @"$tmp/q.bin" "$URL" ;;
  *) echo "mode must be get, post, h2 or json" >&2; exit 2 ;;
esac
tr -d '\r' < "$tmp/h" | grep -iE '^(HTTP/|content-type|cache-control)' | sed 's/^/< /'
if grep -qi '^content-type: *application/dns-message' "$tmp/h"; then
  od -An -tx1 -v "$tmp/r.bin" > "$tmp/r.hex"
  drill -i "$tmp/r.hex" | grep -vE '^;; (Query time|WHEN|SERVER|MSG SIZE)|^$'
else
  cat "$tmp/r.bin"; echo
fi
DNSHARNESS_SH_EOF
chmod 755 "$DIR/json-shim.py" "$DIR/query.sh"

# ----------------------------------------------------------------- 5. start
spawn() {  # name cmd... : own session (survives the caller), pid file, log file
  local name=$1; shift
  : > "$LOGS/$name.log"
  setsid "$@" < /dev/null >> "$LOGS/$name.log" 2>&1 9>&- &   # 9>&-: servers must not hold the lock
  echo $! > "$PIDS/$name.pid"
}
wait_for() {  # name probe-function : up to 10 s
  local name=$1 probe=$2 pid i
  pid=$(cat "$PIDS/$name.pid")
  for i in $(seq 100); do
    alive "$pid" || { tail -20 "$LOGS/$name.log" >&2; die "$name exited during start-up"; }
    "$probe" && return 0
    if grep -qE "error: .*(failed to load zone|zone event 'load' failed)" "$LOGS/$name.log"; then
      grep -E 'error:' "$LOGS/$name.log" >&2; die "knotd could not load a zone (see above)"
    fi
    sleep 0.1
  done
  tail -20 "$LOGS/$name.log" >&2; die "$name did not become ready in 10 s"
}
knot_ready() {  # every zone answers its SOA authoritatively
  local z
  for z in "${zones[@]}"; do
    [[ "$(/usr/bin/kdig @"$ADDR" -p "$AUTH_PORT" +tcp +time=1 +retry=0 +norecurse "$z." SOA 2>/dev/null)" \
       == *'status: NOERROR'* ]] || return 1
  done
}
doh_ready() {  # RFC 8484 POST of "example.test SOA": HTTP 200, RCODE 0, ANCOUNT >= 1
  local h
  printf '\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x04test\x00\x00\x06\x00\x01' > "$RUN/probe.q"
  curl -s --max-time 2 -o "$RUN/probe.r" -H 'content-type: application/dns-message' \
       --data-binary @"$RUN/probe.q" "http://$ADDR:$DOH_PORT/dns-query" 2>/dev/null || return 1
  h=$(od -An -tx1 -v -N8 "$RUN/probe.r" | tr -d ' \n')
  [ "${#h}" = 16 ] && [ $((0x${h:6:2} & 15)) = 0 ] && [ $((0x${h:12:4})) -ge 1 ]
}
json_ready() {
  local body
  body=$(curl -s --max-time 2 -H 'accept: application/dns-json' \
         "http://$ADDR:$JSON_PORT/dns-query?name=example.test&type=SOA" 2>/dev/null) || return 1
  [[ "$body" == *'"Status": 0,'*'"Answer"'* ]]
}

spawn knot /usr/sbin/knotd -c "$DIR/knot.conf"
wait_for knot knot_ready
if grep -q 'notice: .*check' "$LOGS/knot.log"; then
  log "knotd loaded these RFC violations on purpose (semantic-checks: soft):"
  grep 'notice: .*check' "$LOGS/knot.log" | sed 's/^.*notice: /    /' >&2
fi
spawn dnsdist /usr/bin/dnsdist --supervised --disable-syslog -C "$DIR/dnsdist.conf"
wait_for dnsdist doh_ready
if [ "$JSON_SHIM" = 1 ]; then
  spawn json-shim "$PY" -u "$DIR/json-shim.py" --listen "$ADDR" --port "$JSON_PORT" \
        --upstream "http://$ADDR:$DOH_PORT/dns-query"
  wait_for json-shim json_ready
fi

ms=$(( ($(date +%s%N) - T0) / 1000000 ))
pids="knotd $(cat "$PIDS/knot.pid"), dnsdist $(cat "$PIDS/dnsdist.pid")"
[ "$JSON_SHIM" = 1 ] && pids+=", json-shim $(cat "$PIDS/json-shim.pid")"
log "ready in ${ms} ms; pids: $pids"
log "authoritative DNS (knotd, UDP+TCP): $ADDR:$AUTH_PORT   zones: ${zones[*]}"
log "RFC 8484 DoH (dnsdist, GET ?dns= / POST application/dns-message): http://$ADDR:$DOH_PORT/dns-query"
[ -n "$JSON_URL" ] && log "JSON DoH (shim, ?name=&type=, application/dns-json):            $JSON_URL"
log "try: $DIR/query.sh good.example.test CNAME get    stop: $DIR/stop.sh    logs: $LOGS/"
echo "http://$ADDR:$DOH_PORT/dns-query"
