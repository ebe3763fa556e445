// The server side of a WebSocket for the tests' local peers, without a library: the handshake's
// accept key and a reader of the short masked frames their clients send. Shared by the workers tests'
// peers (test/global/peers.mjs) and `npm run d1-bytes`'s echo app (scripts/d1-bytes.mjs).
import { createHash } from "node:crypto";

/** `Sec-WebSocket-Accept` for the client's `Sec-WebSocket-Key` (RFC 6455 §4.2.2). */
export const acceptOf = (key) =>
  createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");

/**
 * Reads the client's frames from `socket` (short, masked: under 126 bytes each) and gives each text's
 * payload to `onPayload`; a close frame is answered with a close and ends the socket.
 */
export function onShortFrames(socket, onPayload) {
  let buffer = Buffer.alloc(0);
  socket.on("data", (data) => {
    buffer = Buffer.concat([buffer, data]);
    while (buffer.length >= 6) {
      const opcode = buffer[0] & 0x0f;
      const length = buffer[1] & 0x7f;
      if (buffer.length < 6 + length) return;
      const mask = buffer.subarray(2, 6);
      const payload = Buffer.from(buffer.subarray(6, 6 + length).map((b, i) => b ^ mask[i % 4]));
      buffer = buffer.subarray(6 + length);
      if (opcode === 0x8) {
        socket.end(Buffer.from([0x88, 0]));
        return;
      }
      onPayload(payload);
    }
  });
}

/** An unmasked server text frame of `payload` (under 126 bytes). */
export const textFrame = (payload) => Buffer.concat([Buffer.from([0x81, payload.length]), payload]);
