/** A sample's value in a Prometheus text scrape: the line `<series> <value>` (0 when the series has none yet). */
export function metricSample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}
