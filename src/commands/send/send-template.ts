// The single template send's entry point (POST /api/v1/platform-templates/send/): with an Idempotency-Key the
// crash-safe keyed path (./keyed.ts), otherwise the one-append path (./handler.ts).
import type { Services } from '../../services';
import { sendUnkeyed, type SendTemplateInput, type SendTemplateOutput } from './handler';
import { sendKeyed } from './keyed';

export async function sendTemplate(services: Services, input: SendTemplateInput): Promise<SendTemplateOutput> {
  return input.idempotency !== undefined ? sendKeyed(services, input, input.idempotency) : sendUnkeyed(services, input);
}
