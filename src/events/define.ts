import type { FromSchema, JSONSchema } from 'json-schema-to-ts';

/**
 * An event type: its name (PascalCase, past tense), the JSON Schema of its data (a const, so the TS type is
 * derived from the same schema that validates it), its current schema version and the upcasters that turn
 * older stored shapes into the current one (keyed by the version they upgrade *from*).
 */
export interface EventDefinition<T extends string = string, S extends JSONSchema = JSONSchema> {
  readonly type: T;
  readonly schema: S;
  readonly version: number;
  readonly upcasters: Readonly<Record<number, (data: any) => unknown>>;
  readonly description: string;
}

export function defineEvent<const T extends string, const S extends JSONSchema>(
  type: T,
  schema: S,
  options: { version?: number; upcasters?: Record<number, (data: any) => unknown>; description?: string } = {},
): EventDefinition<T, S> {
  return {
    type,
    schema,
    version: options.version ?? 1,
    upcasters: options.upcasters ?? {},
    description: options.description ?? '',
  };
}

/** The domain event (type + data) described by a definition. */
export type EventOf<D> = D extends EventDefinition<infer T, infer S> ? { type: T; data: FromSchema<S> } : never;

/** Reusable schema fragments. */
export const isoDateTime = { type: 'string', format: 'date-time' } as const;
export const nullableString = { type: ['string', 'null'] } as const;
export const positiveInt = { type: 'integer', minimum: 1 } as const;
