// Canonical JSON: what two requests are compared by (docs/idempotency.md, "Same key, same request").

/**
 * JSON with object keys sorted at every depth: equal bodies give equal text whatever their key order. Written with
 * an explicit stack, not recursion: a body nested thousands of levels deep (well inside the 1 MiB limit) is text.
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  const work: Array<{ value: unknown } | string> = [{ value }]; // a value to write, or text to emit as is
  while (work.length > 0) {
    const next = work.pop()!;
    if (typeof next === 'string') {
      out.push(next);
      continue;
    }
    const v = next.value;
    if (Array.isArray(v)) {
      work.push(']');
      for (let i = v.length - 1; i >= 0; i--) {
        work.push({ value: v[i] ?? null });
        if (i > 0) work.push(',');
      }
      work.push('[');
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>).filter(([, e]) => e !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      work.push('}');
      for (let i = entries.length - 1; i >= 0; i--) {
        work.push({ value: entries[i][1] }, `${JSON.stringify(entries[i][0])}:`);
        if (i > 0) work.push(',');
      }
      work.push('{');
    } else {
      out.push(JSON.stringify(v ?? null));
    }
  }
  return out.join('');
}
