// Human labels of the business endpoints (pure; documented in docs/provisioning.md).

export const COMPANY_SIZE_LABELS: Readonly<Record<string, string>> = {
  MICRO: '1-10 employees',
  SMALL: '11-50 employees',
  MEDIUM: '51-250 employees',
  LARGE: '251-1000 employees',
  ENTERPRISE: '1000+ employees',
};

export const companySizeDisplay = (size: string | null): string | null => (size === null ? null : COMPANY_SIZE_LABELS[size] ?? null);

const WEEK = ['MONDAY', 'TUESDAY', 'WEDNESDAY', 'THURSDAY', 'FRIDAY', 'SATURDAY', 'SUNDAY'] as const;
const NAMES = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];

/**
 * The `daysDisplay` of a schedule. Rule: days are put in week order (Monday first, no wrap-around over Sunday);
 * all seven → "Every day"; a run of three or more consecutive days → "First to Last"; shorter runs are listed;
 * parts are joined with ", " (e.g. "Monday to Friday", "Monday, Wednesday", "Monday to Wednesday, Saturday, Sunday").
 * A specific-date schedule (no days) shows its date as given (`YYYY-MM-DD`); no days and no date → "".
 */
export function daysDisplay(days: readonly string[], specificDate: string | null): string {
  const idx = [...new Set(days.map((d) => WEEK.indexOf(d as (typeof WEEK)[number])).filter((i) => i >= 0))].sort((a, b) => a - b);
  if (idx.length === 0) return specificDate ?? '';
  if (idx.length === 7) return 'Every day';
  const parts: string[] = [];
  let start = 0;
  for (let i = 1; i <= idx.length; i++) {
    if (i < idx.length && idx[i] === idx[i - 1] + 1) continue;
    const run = idx.slice(start, i);
    if (run.length >= 3) parts.push(`${NAMES[run[0]]} to ${NAMES[run[run.length - 1]]}`);
    else parts.push(...run.map((d) => NAMES[d]));
    start = i;
  }
  return parts.join(', ');
}
