// A window of recipients: how many one holds (by the tier's spacing), and claiming one (with the number's daily
// quota on spaced tiers, freely on TIER_UNLIMITED).
import type { Pool } from 'pg';
import { type ClaimArgs, type ClaimedRecipient, claimRecipients, claimRecipientsWithQuota } from '../commands/bulk/work';
import { dailyLimitOf, type NumberRecord, recommendedSpacingMs } from '../projections/accounts/queries';
import type { DispatcherSettings } from './bulk-dispatcher-context';

export function windowSize(number: NumberRecord, o: Pick<DispatcherSettings, 'unlimitedWindow' | 'windowMs'>): number {
  const spacing = recommendedSpacingMs(number.messagingLimitTier);
  if (spacing <= 0) return o.unlimitedWindow;
  return Math.max(1, Math.min(100, Math.floor(o.windowMs / spacing)));
}

export interface ClaimedWindow {
  claimed: ClaimedRecipient[];
  /** nothing claimed because the quota is used up */
  blocked: { used: number; limit: number; resumeAt: Date | null } | undefined;
}

export async function claimWindow(pool: Pool, claim: ClaimArgs, number: NumberRecord, limited: boolean, fromIdx: number): Promise<ClaimedWindow> {
  if (!limited) return { claimed: await claimRecipients(pool, { ...claim, fromIdx }), blocked: undefined };
  const q = await claimRecipientsWithQuota(pool, { ...claim, fromIdx, numberId: number.id, dailyLimit: dailyLimitOf(number.messagingLimitTier) });
  return { claimed: q.claimed, blocked: q.blocked ? { used: q.used, limit: q.limit, resumeAt: q.resumeAt } : undefined };
}
