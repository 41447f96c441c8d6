import type { Projection } from './projection';
import { apiKeysProjection } from './apikeys/projection';

// Every read model, one import line per projection. Add new projections here.
export const allProjections: readonly Projection[] = [apiKeysProjection];

export function projectionByName(name: string): Projection | undefined {
  return allProjections.find((p) => p.name === name);
}
