import { EventEmitter } from 'node:events';
import { MAX_PENDING_LOG_BYTES, serviceLogOutput } from '../../src/cli/log-output';

// serve's log output never blocks on a stdout nobody reads: past MAX_PENDING_LOG_BYTES lines are dropped, and the
// first line written once it drains says how many were lost. A write error ends the logging, not the process.

class Stdout extends EventEmitter {
  writableLength = 0;
  isTTY = false;
  written: string[] = [];
  write(line: string): boolean {
    this.written.push(line);
    return true;
  }
}

const make = () => {
  const stdout = new Stdout();
  return { stdout, output: serviceLogOutput(stdout as unknown as NodeJS.WriteStream) };
};

describe('serve log output', () => {
  it('drops lines while stdout holds more than the limit, then says how many were dropped', () => {
    const { stdout, output } = make();
    output.write('{"msg":"a"}\n');
    stdout.writableLength = MAX_PENDING_LOG_BYTES + 1;
    output.write('{"msg":"b"}\n');
    output.write('{"msg":"c"}\n');
    stdout.writableLength = 0;
    output.write('{"msg":"d"}\n');
    expect(stdout.written).toHaveLength(3);
    expect(stdout.written[0]).toBe('{"msg":"a"}\n');
    expect(JSON.parse(stdout.written[1])).toMatchObject({ level: 40, msg: '2 log lines dropped: stdout was not being read' });
    expect(stdout.written[2]).toBe('{"msg":"d"}\n');
  });

  it('stops writing after a write error (a closed terminal, a reader gone) without throwing', () => {
    const { stdout, output } = make();
    stdout.emit('error', Object.assign(new Error('write EIO'), { code: 'EIO' }));
    expect(() => output.write('{"msg":"after"}\n')).not.toThrow();
    expect(stdout.written).toEqual([]);
  });
});
