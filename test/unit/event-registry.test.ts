import { defineEvent } from '../../src/events/define';
import { createEventRegistry } from '../../src/events/catalogue';
import { EventRegistry, InvalidEventError } from '../../src/events/registry';
import type { RecordedEvent } from '../../src/ports/event-store';

const meta = { eventId: 'e', correlationId: 'c', causationId: null, companyId: 1, actor: 'test', at: '2026-01-01T00:00:00.000Z' };

describe('event registry', () => {
  const registry = createEventRegistry();

  it('accepts valid data and rejects data that does not match the schema, naming the problem', () => {
    expect(() => registry.validate('AgentRegistered', { companyId: 1, agentId: 3, name: 'Sofia', version: '2.1.0' })).not.toThrow();
    expect(() => registry.validate('AgentRegistered', { companyId: 1, agentId: 'x', name: 'Sofia', version: '2' })).toThrow(/agentId/);
    expect(() => registry.validate('AgentRegistered', { companyId: 1, agentId: 3, name: 'S', version: '2', extra: 1 })).toThrow(InvalidEventError);
    expect(() => registry.validate('NoSuchEvent', {})).toThrow(/unknown event type/);
  });

  it('stamps the schema version on append', () => {
    const prepared = registry.prepare({ type: 'OperatorRegistered', data: { companyId: 1, operatorId: 4, name: 'M' }, metadata: meta });
    expect(prepared.metadata.schemaVersion).toBe(1);
  });

  it('upcasts an old stored shape on read and validates the result', () => {
    const v2 = defineEvent(
      'ThingHappened',
      { type: 'object', additionalProperties: false, required: ['name', 'size'], properties: { name: { type: 'string' }, size: { type: 'integer' } } } as const,
      { version: 2, upcasters: { 1: (d: { title: string }) => ({ name: d.title, size: 0 }) } },
    );
    const r = new EventRegistry([v2]);
    const stored: RecordedEvent = {
      type: 'ThingHappened', data: { title: 'old' }, metadata: { ...meta, schemaVersion: 1 }, streamId: 's', revision: 0n, position: '1:1' as never,
    };
    const up = r.upcast(stored);
    expect(up.data).toEqual({ name: 'old', size: 0 });
    expect(up.metadata.schemaVersion).toBe(2);
    expect(() => r.upcast({ ...stored, data: { nope: true } })).toThrow(InvalidEventError);
  });

  it('publishes every schema, sorted by type', () => {
    const schemas = registry.schemas();
    expect(schemas.length).toBeGreaterThan(20);
    expect(schemas.map((s) => s.type)).toEqual([...schemas.map((s) => s.type)].sort((a, b) => a.localeCompare(b)));
    expect(schemas.find((s) => s.type === 'ApiKeyIssued')?.schema).toHaveProperty('properties.keyHash');
  });
});
