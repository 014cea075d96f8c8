import { AjvCompiler } from '@fastify/ajv-compiler';
import { AJV_OPTIONS } from '../../src/app.js';

/**
 * Reading the examples of an OpenAPI document (the public one and the admin one): every
 * example with the schema it must satisfy, and a check of a value against a schema with the
 * Ajv options requests are validated with in production (src/app.ts AJV_OPTIONS).
 */

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

/** `schema` with every `$ref` to `#/components/schemas/X` replaced by that component (the document has no cycles). */
function derefIn(document: Json, schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map((item) => derefIn(document, item));
  if (schema === null || typeof schema !== 'object') return schema;
  const ref = (schema as Json).$ref;
  if (typeof ref === 'string') {
    const name = /^#\/components\/schemas\/(.+)$/.exec(ref)?.[1];
    const target = name === undefined ? undefined : document.components.schemas[name];
    if (target === undefined) throw new Error(`unresolved $ref ${ref}`);
    return derefIn(document, target);
  }
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, derefIn(document, v)]));
}

/** Ajv as production builds it for request validation (same compiler, same options, ajv-formats). */
const compile = AjvCompiler()({}, AJV_OPTIONS);
function validateIn(document: Json, schema: unknown, value: unknown): string | undefined {
  const check = compile({ schema: derefIn(document, schema) as Json, method: 'GET', url: '/', httpPart: 'body' });
  return check(value) ? undefined : JSON.stringify(check.errors);
}

export interface Example {
  readonly where: string;
  readonly schema: unknown;
  readonly value: unknown;
}

/** The examples of a media type or parameter object: `example`, or each `examples.<name>.value`. */
export function examplesOf(holder: Json): { name: string; value: unknown }[] {
  const out: { name: string; value: unknown }[] = [];
  if ('example' in holder) out.push({ name: 'example', value: holder.example });
  for (const [name, example] of Object.entries((holder.examples ?? {}) as Json)) out.push({ name, value: (example as Json).value });
  return out;
}

/** Every `examples` entry of a schema and of the schemas inside it. */
function schemaExamples(schema: unknown, where: string, out: Example[]): void {
  if (schema === null || typeof schema !== 'object') return;
  const s = schema as Json;
  if (Array.isArray(s.examples)) s.examples.forEach((value: unknown, i: number) => out.push({ where: `${where} examples[${i}]`, schema: s, value }));
  for (const [name, property] of Object.entries((s.properties ?? {}) as Json)) schemaExamples(property, `${where}.${name}`, out);
  if (typeof s.items === 'object') schemaExamples(s.items, `${where}[]`, out);
  for (const keyword of ['anyOf', 'oneOf', 'allOf'] as const) (s[keyword] as unknown[] | undefined)?.forEach((branch, i) => schemaExamples(branch, `${where}/${keyword}/${i}`, out));
  if (typeof s.additionalProperties === 'object') schemaExamples(s.additionalProperties, `${where}{}`, out);
}

/** Every example of `document` with the schema it must satisfy. */
function allExamplesOf(document: Json): Example[] {
  const out: Example[] = [];
  for (const [name, schema] of Object.entries(document.components.schemas as Json)) schemaExamples(schema, `components.schemas.${name}`, out);
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, operation] of Object.entries(item as Json)) {
      if (!HTTP_METHODS.includes(method)) continue;
      const at = `${method.toUpperCase()} ${path}`;
      const media: [string, Json][] = [
        ...Object.entries((operation.requestBody?.content ?? {}) as Json).map(([type, m]) => [`${at} request ${type}`, m as Json] as [string, Json]),
        ...Object.entries((operation.responses ?? {}) as Json).flatMap(([status, response]) =>
          Object.entries(((response as Json).content ?? {}) as Json).map(([type, m]) => [`${at} ${status} ${type}`, m as Json] as [string, Json]),
        ),
        ...((operation.parameters ?? []) as Json[]).map((p) => [`${at} ${p.in} parameter ${p.name}`, p] as [string, Json]),
      ];
      for (const [where, holder] of media) {
        for (const { name, value } of examplesOf(holder)) out.push({ where: `${where} ${name}`, schema: holder.schema, value });
        schemaExamples(holder.schema, `${where} schema`, out);
      }
    }
  }
  return out;
}


/** The examples of `document` and a validator of values against its schemas (its `$ref`s resolved). */
export function documentExamples(document: Json): { validate: (schema: unknown, value: unknown) => string | undefined; allExamples: () => Example[] } {
  return { validate: (schema, value) => validateIn(document, schema, value), allExamples: () => allExamplesOf(document) };
}
