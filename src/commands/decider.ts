/**
 * The emmett decider shape: a pure `decide(command, state)` returning the events to append (or throwing a
 * DomainError), a pure `evolve(state, event)`, and an `initialState`. Time, ids and configuration come in
 * on the command, never read inside.
 */
export interface Decider<Command, Event extends { type: string; data: unknown }, State> {
  decide(command: Command, state: State): Event[];
  evolve(state: State, event: Event): State;
  initialState: () => State;
}

/** A rule of the domain was broken; `code` is stable for callers, `message` is for people. */
export class DomainError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const fold = <E extends { type: string; data: unknown }, S>(decider: Pick<Decider<never, E, S>, 'evolve' | 'initialState'>, events: readonly E[]): S =>
  events.reduce(decider.evolve, decider.initialState());
