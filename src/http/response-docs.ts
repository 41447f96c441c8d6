// What the Idempotency-Key and the rate limits add to a route's answers, in the OpenAPI document: @fastify/swagger
// documents the `headers` of a response schema, which a zod schema carries as metadata.
import type { RouteOptions } from 'fastify';
import { z } from 'zod';
import { methodsOf } from './route-methods';

export type HeaderDocs = Record<string, { type: 'integer' | 'string'; enum?: string[]; description: string }>;

/**
 * `schema` documenting `headers` too (beside any it documents already), described as `description` when given.
 * A route's own schema keeps its validation: only its metadata changes.
 */
export function withHeaderDocs(schema: unknown, headers: HeaderDocs, description?: string): unknown {
  if (!(schema instanceof z.ZodType)) return schema;
  const all = { ...(z.globalRegistry.get(schema)?.headers as HeaderDocs | undefined), ...headers };
  return schema.meta({ ...(description === undefined ? {} : { description }), ...(Object.keys(all).length === 0 ? {} : { headers: all }) });
}

/** `text`, after the route's own description of the same status when it has one */
export function alsoDescribed(schema: unknown, text: string): string {
  const own = schema instanceof z.ZodType ? schema.description : undefined;
  return schema === undefined ? text : `${own ?? 'a refusal of the route itself'}; or ${text}`;
}

/** A refusal's body in a route's error shape (`config.errorShape`), as the root error handler writes it (./errors.ts). */
export function refusalBodyOf(errorShape: unknown): z.ZodType {
  return errorShape === 'export' ? z.object({ error: z.object({ code: z.string(), message: z.string() }) })
    : errorShape === 'detail' ? z.object({ detail: z.string() }) : z.object({ error: z.string() });
}

/**
 * A route's documented answers, to add shared ones to; undefined for a route that declares none (declaring one would
 * hide its default 200) and for fastify's HEAD of a GET, which shares the GET's schema (documented once).
 */
export function documentedAnswersOf(route: RouteOptions): Record<string | number, unknown> | undefined {
  if (methodsOf(route).every((m) => m === 'HEAD')) return undefined;
  return (route.schema as { response?: Record<string | number, unknown> } | undefined)?.response;
}

/**
 * Answer `status`, described as `text` (after the route's own description of it, when it documents one) with
 * `headers`, in `answers`: in the route's own schema for it, else in `body`.
 */
export function documentAnswer(answers: Record<string | number, unknown>, status: number, body: z.ZodType, text: string, headers: HeaderDocs = {}): void {
  const own = answers[status];
  answers[status] = withHeaderDocs(own ?? body, headers, alsoDescribed(own, text));
}
