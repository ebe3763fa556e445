// Helpers for the bench's streamed bodies: an app's filler body written at the pace the connection
// drains, a GET timed to its first and last byte, and the memory of the workerd serving a URL.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";

const CHUNK = Buffer.alloc(64 * 1024, 0x61);

/** Writes `bytes` bytes of filler to `res` in 64 KiB chunks, at the pace the connection drains, then ends it. */
export function writeBytes(res, bytes) {
  let left = bytes;
  const write = () => {
    while (left > 0) {
      const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
      left -= chunk.length;
      if (!res.write(chunk)) return void res.once("drain", write);
    }
    res.end();
  };
  write();
}

/** VmRSS (bytes) of the process listening at `url` (workerd), or null where /proc and ss are not there. */
export function rssReader(url) {
  try {
    const pid = /pid=(\d+)/.exec(execFileSync("ss", ["-ltnpH", `sport = :${new URL(url).port}`]).toString())?.[1];
    if (!pid) return null;
    return () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
  } catch {
    return null;
  }
}

/** GET `url`; resolves with ms to the response's first body byte, ms to its end, and bytes read. */
export function timedGet(url, headers, agent, onChunk) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let first = null;
    let bytes = 0;
    const req = request(url, { headers, agent }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new Error(`${url}: status ${res.statusCode}`));
      }
      res.on("data", (chunk) => {
        first ??= performance.now() - started;
        bytes += chunk.length;
        onChunk?.();
      });
      res.on("end", () => resolve({ first, total: performance.now() - started, bytes }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}
