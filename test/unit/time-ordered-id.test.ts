import { describe, expect, it } from 'vitest';
import { newTimeOrderedId } from '../../src/crypto/ids.js';

/** A version 7 UUID (RFC 9562 §5.7): version nibble 7, variant bits 10. */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** The Unix time in milliseconds of a version 7 UUID: its first 48 bits. */
const timeOf = (id: string): number => parseInt(id.replace(/-/g, '').slice(0, 12), 16);

describe('time-ordered ids (UUID version 7, RFC 9562)', () => {
  it('are version 7 UUIDs whose first 48 bits are the time given', () => {
    const at = Date.UTC(2026, 10, 26, 21, 0, 0, 123);
    const id = newTimeOrderedId(at);
    expect(id).toMatch(UUID_V7);
    expect(timeOf(id)).toBe(at);
  });

  it('encode the current time by default', () => {
    const before = Date.now();
    const id = newTimeOrderedId();
    const after = Date.now();
    expect(timeOf(id)).toBeGreaterThanOrEqual(before);
    expect(timeOf(id)).toBeLessThanOrEqual(after);
  });

  it('sort by time: an id of a later millisecond sorts after every id of an earlier one', () => {
    const earlier = Array.from({ length: 100 }, () => newTimeOrderedId(1_000_000));
    const later = Array.from({ length: 100 }, () => newTimeOrderedId(1_000_001));
    for (const a of earlier) for (const b of later) expect(a < b).toBe(true);
  });

  it('are unique, with random bits beyond the time (74 of them)', () => {
    const ids = Array.from({ length: 10_000 }, () => newTimeOrderedId(1_000_000));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids.slice(0, 100)) expect(id).toMatch(UUID_V7);
  });

  it('made in the same millisecond, sort in the order they were made (a 12-bit counter, RFC 9562 §6.2)', () => {
    for (let round = 0; round < 50; round++) {
      const at = 2_000_000 + round;
      const ids = Array.from({ length: 2048 }, () => newTimeOrderedId(at));
      expect([...ids].sort()).toEqual(ids);
      for (const id of ids.slice(0, 20)) expect(timeOf(id)).toBe(at);
    }
  });

  it('past 4096 in one millisecond, stay unique and valid', () => {
    const ids = Array.from({ length: 10_000 }, () => newTimeOrderedId(3_000_000));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(UUID_V7);
  });
});
