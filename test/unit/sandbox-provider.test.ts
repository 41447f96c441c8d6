import { SandboxProvider } from '../../src/adapters/provider/sandbox';

describe('the sandbox provider', () => {
  it('answers every accepted send with its own wamid-style id, across many refills of its random pool', async () => {
    const provider = new SandboxProvider({ delivery: 'off' });
    const ids = new Set<string>();
    // one recipient for all: only the random part tells the ids apart
    for (let i = 0; i < 1000; i++) {
      const result = await provider.sendTemplate({ phoneNumberId: 'pn-1', to: '+5491155551234', template: 'welcome', language: 'es', components: [] });
      expect(result.providerMessageId).toMatch(/^wamid\.[A-Za-z0-9_-]{40}$/);
      ids.add(result.providerMessageId);
    }
    expect(ids.size).toBe(1000);
  });
});
