/** One sample of the Prometheus text format: its metric name, labels and value. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The samples and the described metric names of a `/metrics` answer (text format 0.0.4). */
export function parsePrometheus(text: string): { samples: PromSample[]; described: Set<string> } {
  const samples: PromSample[] = [];
  const described = new Set<string>();
  for (const line of text.split("\n")) {
    const help = /^# HELP (\S+) /.exec(line);
    if (help) described.add(help[1]!);
    const sample = SAMPLE.exec(line);
    if (!sample || line.startsWith("#")) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (sample[2] ?? "").matchAll(LABEL)) labels[key!] = value!;
    samples.push({ name: sample[1]!, labels, value: Number(sample[3]) });
  }
  return { samples, described };
}

/** The value of the sample named `name` whose labels include `labels`; undefined when there is none. */
export function valueOf(samples: PromSample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}
