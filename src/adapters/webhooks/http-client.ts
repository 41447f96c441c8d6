import http from 'node:http';
import https from 'node:https';
import { guardLookup, guardedLookup, literalHostRefusal, type Resolver } from './address-guard';

export interface WebhookPost {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface WebhookResponse {
  /** null when no response arrived (timeout, connection error, refused address) */
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  /** at most maxBodyBytes of the response body */
  body: string;
}

export interface WebhookHttpClientOptions {
  timeoutMs: number;
  maxBodyBytes: number;
  allowPrivate: boolean;
  /** name resolution (default: the system's); tests stand in for a DNS answer that changed after registration */
  resolve?: Resolver;
}

/** Posts signed webhook bodies: keep-alive, a whole-request timeout, a capped response body, the SSRF guard. */
export class WebhookHttpClient {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(private readonly options: WebhookHttpClientOptions) {
    // every new connection resolves through the guard, so a name re-pointed at a private address is caught there
    const lookup = options.allowPrivate ? undefined : ((options.resolve ? guardLookup(options.resolve) : guardedLookup) as never);
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets: 128, lookup } as http.AgentOptions);
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 128, lookup } as https.AgentOptions);
  }

  post(request: WebhookPost): Promise<WebhookResponse> {
    const started = process.hrtime.bigint();
    const elapsed = () => Number((process.hrtime.bigint() - started) / 1_000_000n);
    const url = new URL(request.url);
    const refusal = this.options.allowPrivate ? null : literalHostRefusal(url);
    if (refusal) return Promise.resolve({ statusCode: null, error: refusal, body: '', latencyMs: elapsed() });
    const max = this.options.maxBodyBytes;
    return new Promise((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (r: Omit<WebhookResponse, 'latencyMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ ...r, latencyMs: elapsed() });
      };
      const isHttps = url.protocol === 'https:';
      const req = (isHttps ? https : http).request(url, {
        method: 'POST',
        agent: isHttps ? this.httpsAgent : this.httpAgent,
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(request.body)), 'user-agent': 'Switchboard-Webhooks/1', ...request.headers },
      }, (res) => {
        const statusCode = res.statusCode ?? null;
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => finish({ statusCode, error: null, body: Buffer.concat(chunks).toString('utf8') });
        res.on('data', (chunk: Buffer) => {
          chunks.push(chunk.subarray(0, max - size));
          size = Math.min(max, size + chunk.length);
          if (size >= max) {
            // the rest is never read: the answer is known, the connection is dropped instead of drained
            done();
            res.destroy();
          }
        });
        res.on('end', done);
        res.on('error', done);
        res.on('close', done);
      });
      timer = setTimeout(() => {
        const error = `timed out after ${this.options.timeoutMs} ms`;
        finish({ statusCode: null, error, body: '' });
        req.destroy(new Error(error));
      }, this.options.timeoutMs);
      req.on('error', (err) => finish({ statusCode: null, error: err.message || String(err), body: '' }));
      req.end(request.body);
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
