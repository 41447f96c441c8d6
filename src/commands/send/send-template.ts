// The single template send's entry point (POST /api/v1/platform-templates/send/): with an Idempotency-Key the
// crash-safe keyed path (./keyed.ts), otherwise the one-append path (./handler.ts). The quota gate's admissions of
// the request (./quota-gate.ts) are given back once it is answered.
import type { Services } from '../../services';
import { SendRefusedError, sendUnkeyed, type SendTemplateInput, type SendTemplateOutput } from './handler';
import { sendKeyed } from './keyed';
import { QuotaHolds, sendQuotaGateOf } from './quota-gate';

export async function sendTemplate(services: Services, input: SendTemplateInput): Promise<SendTemplateOutput> {
  const quotaHolds = new QuotaHolds(sendQuotaGateOf(services));
  const held = { ...input, quotaHolds };
  let output: SendTemplateOutput;
  try {
    output = held.idempotency !== undefined ? await sendKeyed(services, held, held.idempotency) : await sendUnkeyed(services, held);
  } catch (err) {
    // the provider may have the message (or the failure is unexpected): its reservation counts until it expires
    const unknown = !(err instanceof SendRefusedError) || err.code === 'OUTCOME_UNKNOWN';
    await quotaHolds.release(unknown);
    throw err;
  }
  await quotaHolds.release();
  return output;
}
