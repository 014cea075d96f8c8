/**
 * The parameters of one statement, numbered in the order they are written: {@link add} appends
 * a value and returns its placeholder (`$1`, `$2`, …). A statement assembled from fragments of
 * several functions passes one `SqlParams` to each, which name their values where they write
 * them (`const $now = p.add(now)`), so no function computes another's parameter numbers and
 * editing one fragment cannot shift `$n` in another. Unnamed (extended-protocol) statements
 * only, as everywhere in the service (docs/operations.md, "Behind a connection pooler").
 */
export class SqlParams {
  /** The values in placeholder order: the statement's parameter array. */
  readonly values: unknown[] = [];

  /** Appends `value` and returns its placeholder, `$<its position from 1>`. */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}
