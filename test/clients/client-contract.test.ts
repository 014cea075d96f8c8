/**
 * Run-time half of the client's contract (test/clients/client-contract.ts): each route of the
 * table is a route of the running service, with the table's method, success status and schemas.
 * The service's OpenAPI document is generated from the route schemas themselves
 * (src/plugins/openapi.ts), so a route that validated its body or serialised its answer with
 * another schema than the one the client's types are compared with (client-contract.types.ts)
 * shows a different schema here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { CLIENT_CONTRACT } from './client-contract.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Members that only document a schema, which the OpenAPI document moves (`examples` to the media type) or drops (`$id`). */
const DOCUMENTATION = new Set(['examples', '$id']);

/**
 * A TypeBox schema as the document shows it: JSON (TypeBox's symbol keys, such as its `Kind`,
 * dropped), without DOCUMENTATION members, and `const: x` written `enum: [x]` as the document does.
 */
function json(schema: unknown): unknown {
  if (schema === undefined) return undefined;
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) => {
    if (DOCUMENTATION.has(key)) return undefined;
    if (value === null || typeof value !== 'object' || !('const' in value)) return value;
    const { const: only, ...rest } = value as Json;
    return { ...rest, enum: [only] };
  });
}

/** A schema of the OpenAPI document with every `$ref` to `components.schemas` replaced by the schema it names, without DOCUMENTATION members. */
function resolved(schema: unknown, components: Json): unknown {
  if (Array.isArray(schema)) return schema.map((item) => resolved(item, components));
  if (schema === null || typeof schema !== 'object') return schema;
  const ref = (schema as Json).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) return resolved(components[ref.slice('#/components/schemas/'.length)], components);
  return Object.fromEntries(Object.entries(schema as Json).flatMap(([key, value]) => (DOCUMENTATION.has(key) ? [] : [[key, resolved(value, components)]])));
}

let ctx: TestContext;
let paths: Json;
let components: Json;

beforeAll(async () => {
  ctx = await createTestContext();
  const document = (await ctx.app.inject({ method: 'GET', url: '/auth/v0/openapi.json' })).json() as Json;
  paths = document.paths as Json;
  components = document.components.schemas as Json;
});
afterAll(async () => ctx?.close());

describe("@latchkey/client's contract: the routes the client calls use the schemas its types are checked against", () => {
  for (const [operation, route] of Object.entries(CLIENT_CONTRACT)) {
    it(`${operation}: ${route.method} ${route.url}`, () => {
      const op = paths[route.url.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()] as Json | undefined;
      expect(op, 'no such route in the OpenAPI document').toBeDefined();
      const success = Object.keys(op!.responses as Json).filter((status) => /^2/.test(status));
      expect(success).toEqual([String(route.status)]);
      const body = resolved(op!.requestBody?.content?.['application/json']?.schema, components);
      expect(body).toEqual(json('body' in route ? route.body : undefined));
      const answer = resolved((op!.responses as Json)[String(route.status)].content?.['application/json']?.schema, components);
      expect(answer).toEqual(json(route.response ?? undefined));
    });
  }
});
