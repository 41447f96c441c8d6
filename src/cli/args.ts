import { InvalidArgumentError } from 'commander';

/** An option's value as a positive integer; anything else is reported by commander as an invalid argument (exit 1). */
export const positiveInt = (v: string): number => {
  if (!/^[1-9]\d*$/.test(v)) throw new InvalidArgumentError('A positive integer is expected.');
  return Number(v);
};

/** A company or user id: a positive integer that fits the read models' Postgres `integer` columns. */
export const positiveId = (v: string): number => {
  const n = positiveInt(v);
  if (n > 2_147_483_647) throw new InvalidArgumentError('An id from 1 to 2147483647 is expected.');
  return n;
};
