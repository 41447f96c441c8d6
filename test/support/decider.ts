import type { Decider } from '../../src/commands/decider';

/**
 * given(events) / when(command) / then(events | error) for pure deciders:
 *   spec(decider).given([...]).when(cmd).then([...])
 *   spec(decider).given([...]).when(cmd).thenThrows('CODE')
 */
export function spec<C, E extends { type: string; data: unknown }, S>(decider: Decider<C, E, S>) {
  return {
    given(events: E[]) {
      return {
        when(command: C) {
          const run = () => decider.decide(command, events.reduce(decider.evolve, decider.initialState()));
          return {
            then(expected: E[]) {
              expect(run()).toEqual(expected);
            },
            thenThrows(code: string) {
              let caught: unknown;
              try {
                run();
              } catch (err) {
                caught = err;
              }
              expect(caught).toBeDefined();
              expect((caught as { code?: string }).code).toBe(code);
            },
          };
        },
      };
    },
  };
}
