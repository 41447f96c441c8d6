import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { EventDefinition } from './define';
import type { EventToAppend, RecordedEvent } from '../ports/event-store';

export class InvalidEventError extends Error {
  override name = 'InvalidEventError';
}

/** Validates event data against the schemas on append and on read, and upcasts old versions on read. */
export class EventRegistry {
  private readonly defs = new Map<string, EventDefinition>();
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(definitions: readonly EventDefinition[]) {
    const ajv = new Ajv({ allErrors: true, strict: false });
    addFormats(ajv);
    for (const d of definitions) {
      if (this.defs.has(d.type)) throw new Error(`event type ${d.type} defined twice`);
      this.defs.set(d.type, d);
      this.validators.set(d.type, ajv.compile(d.schema as object));
    }
  }

  has(type: string): boolean {
    return this.defs.has(type);
  }

  versionOf(type: string): number {
    return this.require(type).version;
  }

  validate(type: string, data: unknown): void {
    const validate = this.validators.get(type);
    if (!validate) throw new InvalidEventError(`unknown event type ${type}`);
    if (!validate(data)) {
      const why = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
      throw new InvalidEventError(`${type} does not match its schema: ${why}`);
    }
  }

  /** Stamps the schema version into the metadata and validates. */
  prepare(event: EventToAppend): EventToAppend {
    this.validate(event.type, event.data);
    return { ...event, metadata: { ...event.metadata, schemaVersion: this.versionOf(event.type) } };
  }

  /** Upcasts a stored event to the current version of its type, then validates it. */
  upcast(event: RecordedEvent): RecordedEvent {
    const def = this.require(event.type);
    let version = event.metadata.schemaVersion ?? 1;
    let data = event.data;
    while (version < def.version) {
      const up = def.upcasters[version];
      if (!up) throw new InvalidEventError(`no upcaster for ${event.type} v${version}`);
      data = up(data);
      version++;
    }
    this.validate(event.type, data);
    return version === (event.metadata.schemaVersion ?? 1) ? event : { ...event, data, metadata: { ...event.metadata, schemaVersion: version } };
  }

  /** The published JSON Schemas, for analytics replay (`switchboard events schemas`). */
  schemas(): Array<{ type: string; version: number; description: string; schema: unknown }> {
    return [...this.defs.values()]
      .sort((a, b) => a.type.localeCompare(b.type))
      .map((d) => ({ type: d.type, version: d.version, description: d.description, schema: d.schema }));
  }

  private require(type: string): EventDefinition {
    const d = this.defs.get(type);
    if (!d) throw new InvalidEventError(`unknown event type ${type}`);
    return d;
  }
}
