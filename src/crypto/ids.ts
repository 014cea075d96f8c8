import { randomFillSync } from 'node:crypto';

/** Bytes of a UUID (RFC 9562 §4). */
export const UUID_BYTES = 16;
/** Bytes of the Unix time in milliseconds at the start of a version 7 UUID (48 bits). */
const TIME_BYTES = 6;
/** Random bytes taken from the CSPRNG at once, then handed out 16 at a time (as node:crypto's randomUUID does). */
const POOL_BYTES = UUID_BYTES * 128;

let pool = Buffer.alloc(0);
let offset = 0;

/** The largest value of the 12-bit counter in `rand_a`. */
const COUNTER_MAX = 0xfff;
/** A new millisecond's counter starts below 2048, leaving at least 2048 ids before it runs out (RFC 9562 §6.2). */
const COUNTER_SEED_MASK = 0x7ff;
/** The millisecond the counter belongs to, and its last value. */
let counterMs = -1;
let counter = 0;

/**
 * A new time-ordered UUID, version 7 (RFC 9562 §5.7): the first 48 bits are the Unix time in
 * milliseconds of this machine's clock, the other 74 free bits come from the CSPRNG. For the ids
 * of rows that write paths insert many of (refresh tokens, sessions, devices, outbox rows): ids
 * made in the same second sort together, so their primary-key and foreign-key index entries go
 * to the few B-tree pages of recent rows, which stay in PostgreSQL's cache, instead of a random
 * page of a large index each (which must be read, and whose first change after a checkpoint
 * writes the whole page to the WAL; docs/performance.md, "At a million users"). The id reveals
 * when its row was made (RFC 9562 §8), so it is only used where that time is no secret: the
 * session's `created_at` is shown with its id, a refresh token's id is part of the token (its
 * holder knows when it got it; src/crypto/refresh-token.ts), and outbox rows are never shown.
 *
 * Ids made by this process in the same millisecond also sort in the order they were made: the
 * 12 bits after the version (`rand_a`) are a counter, started at a random value below 2048 in
 * each new millisecond and increased by one for each further id of it (RFC 9562 §6.2, method 1).
 * So rows a request inserts one after the other within a millisecond (a superseded code's email,
 * then the new one) read back in that order by `ORDER BY created_at, id`. Past 4096 ids in one
 * millisecond the counter starts again at a random value: the ids stay unique (62 random bits
 * remain), only their order within that millisecond is lost.
 * @param nowMs the time to encode, milliseconds since the epoch (default: now).
 * @returns the UUID in its lower-case text form.
 */
export function newTimeOrderedId(nowMs: number = Date.now()): string {
  if (offset + UUID_BYTES > pool.length) {
    pool = randomFillSync(Buffer.alloc(POOL_BYTES));
    offset = 0;
  }
  const bytes = Buffer.from(pool.subarray(offset, offset + UUID_BYTES));
  offset += UUID_BYTES;
  if (nowMs === counterMs && counter < COUNTER_MAX) {
    counter += 1;
  } else {
    counterMs = nowMs;
    counter = bytes.readUInt16BE(6) & COUNTER_SEED_MASK;
  }
  bytes.writeUIntBE(nowMs, 0, TIME_BYTES);
  bytes[6] = 0x70 | (counter >> 8); // version 7, then the counter's top 4 bits
  bytes[7] = counter & 0xff;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // variant 10 (RFC 9562 §4.1)
  return uuidText(bytes);
}

/**
 * The least version 7 UUID of the millisecond of `at` (RFC 9562 §5.7): every one made for an
 * earlier instant, here or by the database's `uuid_v7()` (migration 014), sorts below it, so
 * "created before `at`" is the key range `id < floor`.
 */
export function uuidV7Floor(at: Date): string {
  const bytes = Buffer.alloc(UUID_BYTES);
  bytes.writeUIntBE(Math.max(0, at.getTime()), 0, TIME_BYTES);
  return uuidText(bytes);
}

/** The 16 bytes of a UUID given in its text form (`8-4-4-4-12` hex digits, either case). */
export function uuidBytes(id: string): Buffer {
  return Buffer.from(id.replaceAll('-', ''), 'hex');
}

/** The lower-case text form of a UUID's 16 bytes (any 16 bytes: PostgreSQL's `uuid` accepts every value). */
export function uuidText(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
