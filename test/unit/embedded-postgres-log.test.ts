import { reasonIn } from '../../src/adapters/postgres/embedded-server';

// The reason a start-up line gives when the embedded Postgres exits before it is ready (docs/install.md,
// "Start-up errors"): Postgres's FATAL line with its DETAIL and HINT, without timestamps, else the log's end.
describe('reasonIn (the embedded Postgres log)', () => {
  it('keeps the FATAL, DETAIL and HINT lines without their prefixes', () => {
    const log = [
      '2026-11-25 18:00:00.000 UTC [4242] LOG:  starting PostgreSQL 17.10',
      '2026-11-25 18:00:00.001 UTC [4242] FATAL:  database files are incompatible with server',
      '2026-11-25 18:00:00.001 UTC [4242] DETAIL:  The data directory was initialized by PostgreSQL version 9.6, which is not compatible with this version 17.10.',
      '2026-11-25 18:00:00.002 UTC [4242] LOG:  database system is shut down',
    ].join('\n');
    expect(reasonIn(log)).toBe(
      'FATAL: database files are incompatible with server DETAIL: The data directory was initialized by PostgreSQL version 9.6, which is not compatible with this version 17.10.',
    );
  });

  it('without such lines: the last three lines, or says there was none', () => {
    expect(reasonIn('postgres: could not access the server configuration file "/x/pg/postgresql.conf": No such file or directory\n'))
      .toBe('postgres: could not access the server configuration file "/x/pg/postgresql.conf": No such file or directory');
    expect(reasonIn('a\nb\n\nc\nd\n')).toBe('b c d');
    expect(reasonIn('')).toBe('no message');
  });
});
