import type { PoolClient } from 'pg';
import type { RecordedEvent } from '../ports/event-store';

/**
 * A read model: its tables live in their own Postgres schema (`schema`). `ddl` and `apply` use unqualified
 * table names: the runner sets `search_path` to the schema being written (the live one, or the fresh one a
 * rebuild fills). Query functions use the qualified live names (`schema.table`).
 * Bump `version` when the DDL or apply logic changes: the runner rebuilds it from position zero.
 */
export interface Projection {
  readonly name: string;
  readonly version: number;
  readonly schema: string;
  readonly ddl: string;
  readonly handles: readonly string[];
  /** Must be idempotent: a redelivered event changes nothing. */
  apply(tx: PoolClient, event: RecordedEvent): Promise<void>;
}

export const rebuildSchemaOf = (p: Projection): string => `${p.schema}__next`;
