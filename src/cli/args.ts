import { InvalidArgumentError } from 'commander';

/** An option's value as a positive integer; anything else is reported by commander as an invalid argument (exit 1). */
export const positiveInt = (v: string): number => {
  if (!/^[1-9]\d*$/.test(v)) throw new InvalidArgumentError('A positive integer is expected.');
  return Number(v);
};
