// What the Idempotency-Key and the rate limits add to a route's answers, in the OpenAPI document: @fastify/swagger
// documents the `headers` of a response schema, which a zod schema carries as metadata.
import { z } from 'zod';

export type HeaderDocs = Record<string, { type: 'integer' | 'string'; enum?: string[]; description: string }>;

/**
 * `schema` documenting `headers` too (beside any it documents already), described as `description` when given.
 * A route's own schema keeps its validation: only its metadata changes.
 */
export function withHeaderDocs(schema: unknown, headers: HeaderDocs, description?: string): unknown {
  if (!(schema instanceof z.ZodType)) return schema;
  const documented = z.globalRegistry.get(schema)?.headers as HeaderDocs | undefined;
  return schema.meta({ ...(description === undefined ? {} : { description }), headers: { ...documented, ...headers } });
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
