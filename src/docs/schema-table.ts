/** Enums longer than this are shown as a count. */
const MAX_ENUM_SHOWN = 8;
/** A JSON schema, as far as the generated pages read one. */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  additionalProperties?: unknown;
}

export const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function typeOf(j: JsonSchema): string {
  if (j.const !== undefined) return JSON.stringify(j.const);
  // A long enum (the error types) reads better as a count; its description says where it is listed.
  if (j.enum && j.enum.length > MAX_ENUM_SHOWN) return `string (one of ${j.enum.length})`;
  if (j.enum) return j.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (j.anyOf) return [...new Set(j.anyOf.map(typeOf))].join(' | ');
  const t = Array.isArray(j.type) ? j.type.join(' | ') : j.type;
  if (t === 'array') return `${j.items ? typeOf(j.items) : 'any'}[]`;
  if (t === 'object' && j.properties) return 'object';
  if (t === 'integer' || t === 'number') {
    const max =
      j.maximum !== undefined && j.maximum < Number.MAX_SAFE_INTEGER ? j.maximum : undefined;
    const min =
      j.minimum !== undefined && j.minimum > Number.MIN_SAFE_INTEGER ? j.minimum : undefined;
    if (min !== undefined && max !== undefined) return `${t} ${min}..${max}`;
    if (min !== undefined) return `${t} ≥ ${min}`;
    return t;
  }
  return t ?? 'any';
}

/** A markdown table of an object schema's fields: name, type, whether required, notes. */
export function fieldTable(j: JsonSchema, io: 'input' | 'output'): string {
  const props = Object.entries(j.properties ?? {});
  if (props.length === 0) return '_(empty object)_\n';
  const required = new Set(j.required ?? []);
  const rows = props.map(
    ([name, p]) =>
      `| \`${name}\` | ${cell(typeOf(p))} | ${required.has(name) ? 'yes' : ''} | ${cell(p.description ?? '')} |`,
  );
  const extra =
    io === 'input' && j.additionalProperties !== false
      ? '\nOther fields are accepted and ignored (SGLang sends extras).\n'
      : '';
  return `| Field | Type | Required | Notes |\n|---|---|---|---|\n${rows.join('\n')}\n${extra}`;
}
