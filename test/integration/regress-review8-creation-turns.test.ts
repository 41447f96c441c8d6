import { createWebhookEndpoint, webhookEndpointDepsOf } from '../../src/commands/webhook-endpoint/handler';
import { DomainError } from '../../src/commands/decider';
import { createTestContext, type TestContext } from '../support/services';

// Review 8 of a231d3a: at most two companies' endpoint-creation turns run at once per process. Attacked on its error
// paths: turns that throw (asynchronously, synchronously, the endpoint limit's 409 inside the turn) must give their
// slot on, once; a leaked slot would leave fewer than two running (or none: every later creation hangs), a slot given
// twice more than two. PASSES on 3c06d15 (sound).

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ env: { WEBHOOKS_MAX_ENDPOINTS_PER_COMPANY: '1' } });
});
afterAll(async () => ctx?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Turns of `companies` at once; each stays a moment inside; the most inside at one time. */
async function mostAtOnce(turn: ReturnType<typeof webhookEndpointDepsOf>['creationTurn'], companies: number[]): Promise<number> {
  let inside = 0;
  let most = 0;
  await Promise.all(companies.map((companyId) => turn(companyId, async () => {
    inside++;
    most = Math.max(most, inside);
    await sleep(30);
    inside--;
  })));
  return most;
}

it('turns that fail inside (rejection, synchronous throw, the limit\'s DomainError) give their slot on: still two at once after them', async () => {
  const deps = webhookEndpointDepsOf(ctx.services);
  expect(await mostAtOnce(deps.creationTurn, [901, 902, 903, 904, 905, 906])).toBe(2);

  const failures = await Promise.allSettled([
    ...[911, 912, 913].map((companyId) => deps.creationTurn(companyId, async () => { throw new Error(`boom ${companyId}`); })),
    ...[914, 915].map((companyId) => deps.creationTurn(companyId, (() => { throw new Error(`sync boom ${companyId}`); }) as () => Promise<never>)),
    deps.creationTurn(916, async () => { await sleep(10); throw new DomainError('X', 'late boom'); }),
  ]);
  expect(failures.map((f) => f.status)).toEqual(Array(6).fill('rejected'));

  expect(await mostAtOnce(deps.creationTurn, [921, 922, 923, 924, 925, 926, 927, 928])).toBe(2);
  // one company's turns still go one after the other
  expect(await mostAtOnce(deps.creationTurn, [931, 931, 931, 931])).toBe(1);
});

it('creations over the endpoint limit (409 inside the turn) of many companies at once: each company gets one, the rest refused, and creations go on', async () => {
  const deps = webhookEndpointDepsOf(ctx.services);
  const create = (companyId: number, n: number) =>
    createWebhookEndpoint(deps, { actor: 'test', companyId }, { url: `https://hooks.example/${companyId}/${n}`, eventTypes: ['message.sent'], description: null });
  const companies = [941, 942, 943, 944, 945];
  const outcomes = await Promise.allSettled(companies.flatMap((c) => [create(c, 1), create(c, 2), create(c, 3)]));
  const made = outcomes.filter((o) => o.status === 'fulfilled').length;
  const refused = outcomes.filter((o) => o.status === 'rejected' && o.reason instanceof DomainError).length;
  expect([made, refused]).toEqual([companies.length, companies.length * 2]);
  // nothing leaked: a fresh company's creation is made
  await expect(create(946, 1)).resolves.toMatchObject({ endpointId: expect.any(String) });
});
