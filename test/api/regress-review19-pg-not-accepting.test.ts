// Regression review 19: 3e86581 took 55000 at connect (a database that does not allow connections) as unreachable by
// its English text alone. Postgres writes that text in its lc_messages (a server set up in Spanish or German answers
// "la base de datos «x» no acepta conexiones en este momento"), so on such a server the refusal was a 500 "internal
// server error" again. Postgres's ErrorResponse also names the routine that raised it, never translated: the refusal
// is CheckMyDatabase's, a statement's 55000 (currval before nextval) another's. Provoked for real (a real server's
// refusal and routine); the translated one from a loopback socket that answers pg's startup as such a server does.
import type { Socket } from 'node:net';
import { Pool } from 'pg';
import { failureClasses as classes, failureOf as failureOfPool, withLoopbackServer, withScratchDatabase } from '../support/pg-failures';

const failureOf = (url: string, sql = 'SELECT 1'): Promise<any> =>
  failureOfPool(new Pool({ connectionString: url, connectionTimeoutMillis: 10_000 }), sql);

/** An ErrorResponse (protocol 3.0) with the given fields, as a backend sends it at startup. */
function errorResponse(fields: Record<string, string>): Buffer {
  const body = Buffer.concat([...Object.entries(fields).map(([k, v]) => Buffer.from(`${k}${v}\0`, 'utf8')), Buffer.from([0])]);
  const head = Buffer.alloc(5);
  head.write('E', 0, 'ascii');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

describe('regression review 19: a database not accepting connections, whatever the language of its server', () => {
  it("a real server's refusal is CheckMyDatabase's (the routine the classification reads), a statement's 55000 another routine's", async () => {
    await withScratchDatabase('rr19', async ({ name, url, admin }) => {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      const err = await failureOf(url);
      expect([err.code, err.routine]).toEqual(['55000', 'CheckMyDatabase']);
      expect(classes(err)).toEqual({ unreachable: true, lost: true, unavailable: true });
      const currval = await admin.query('CREATE TEMP SEQUENCE rr19_seq').then(() => admin.query(`SELECT currval('rr19_seq')`)).then(() => undefined, (e) => e);
      expect(currval.code).toBe('55000');
      expect(currval.routine).not.toBe('CheckMyDatabase');
      expect(classes(currval)).toEqual({ unreachable: false, lost: false, unavailable: false });
    });
  });

  it('a database left invalid (an interrupted DROP DATABASE): 55000 at connect from another routine, not an outage (an operator\'s to mend)', async () => {
    await withScratchDatabase('rr19', async ({ name, url, admin }) => {
      await admin.query('UPDATE pg_database SET datconnlimit = -2 WHERE datname = $1', [name]); // how Postgres marks it invalid
      const err = await failureOf(url);
      expect([err.code, err.routine]).toEqual(['55000', 'InitPostgres']);
      expect(classes(err)).toEqual({ unreachable: false, lost: false, unavailable: false });
    });
  });

  it.each([
    ['es', 'la base de datos «sb» no acepta conexiones en este momento'],
    ['de', 'Datenbank »sb« akzeptiert gegenwärtig keine Verbindungen'],
  ])('the refusal written in %s (lc_messages): unreachable, as in English', async (_lang, message) => {
    const refuse = (socket: Socket) => {
      socket.once('data', () => {
        // the startup message read: refused as CheckMyDatabase refuses it (severity, code, text, file, line, routine)
        socket.end(errorResponse({ S: 'FATAL', V: 'FATAL', C: '55000', M: message, F: 'postinit.c', L: '379', R: 'CheckMyDatabase' }));
      });
    };
    const err = await withLoopbackServer(refuse, (port) => failureOf(`postgres://u:p@127.0.0.1:${port}/sb`));
    expect([err.code, err.message, err.routine]).toEqual(['55000', message, 'CheckMyDatabase']);
    expect(classes(err)).toEqual({ unreachable: true, lost: true, unavailable: true });
  });
});
