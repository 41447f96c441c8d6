// Pure: turns a template's declared variables and buttons plus the values a client sent into the provider's
// template components, or into per-field validation messages. The value formats are documented in
// docs/sends.md; keep the two in step.
import type { TemplateComponent, TemplateParameter } from '../../ports/provider';
import { parseIsoInstant } from '../../shared/iso-instant';

export type VariableType = 'TEXT' | 'CURRENCY' | 'DATE_TIME' | 'IMAGE' | 'VIDEO' | 'DOCUMENT';
export type ComponentKind = 'HEADER' | 'BODY' | 'FOOTER' | 'BUTTON';

export interface TemplateVariable {
  name: string;
  type: VariableType;
  position: number;
  isRequired: boolean;
  component: ComponentKind;
}

export interface TemplateButton {
  type: 'URL' | 'QUICK_REPLY' | 'PHONE_NUMBER' | 'COPY_CODE';
  text: string;
  url?: string;
  phoneNumber?: string;
}

export interface TemplateShape {
  variables: readonly TemplateVariable[];
  buttons: readonly TemplateButton[];
}

export type FieldMessages = Record<string, string[]>;

export type ComponentsResult =
  | { ok: true; components: TemplateComponent[] }
  | { ok: false; errors: FieldMessages };

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;
const CURRENCY_CODE = /^[A-Z]{3}$/;
const CURRENCY_TEXT = /^(?:([A-Z]{3})\s*(-?\d+(?:\.\d+)?)|(-?\d+(?:\.\d+)?)\s*([A-Z]{3}))$/;
export const BUTTON_KEY = /^button_(0|[1-9]\d*)$/;

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The value sent under a name: own properties only, so a variable named `toString` or `constructor` left out is missing. */
const sent = (values: Record<string, unknown>, name: string): unknown => (Object.hasOwn(values, name) ? values[name] : undefined);

/** A URL button whose link has a `{{1}}` placeholder takes one dynamic suffix. */
export const isDynamicUrlButton = (b: TemplateButton): boolean => b.type === 'URL' && typeof b.url === 'string' && /\{\{\s*1\s*\}\}/.test(b.url);

/**
 * The BUTTON-component variables describe the dynamic URL buttons: the k-th BUTTON variable (by position)
 * belongs to the k-th dynamic URL button (by button index). Returns button index → variable.
 */
export function buttonVariableOwners(template: TemplateShape): Map<number, TemplateVariable> {
  const vars = template.variables.filter((v) => v.component === 'BUTTON').sort((a, b) => a.position - b.position);
  const owners = new Map<number, TemplateVariable>();
  let k = 0;
  template.buttons.forEach((b, index) => {
    if (isDynamicUrlButton(b) && k < vars.length) owners.set(index, vars[k++]);
  });
  return owners;
}

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

function formatAmount(amount: number): string {
  return amount.toFixed(2);
}

/** One variable value → one provider parameter, or a message saying what is wrong with it. */
export function toParameter(variable: Pick<TemplateVariable, 'name' | 'type'>, value: unknown): TemplateParameter | string {
  const name = variable.name;
  switch (variable.type) {
    case 'TEXT': {
      if (typeof value === 'number' && Number.isFinite(value)) return { type: 'text', text: String(value) };
      if (typeof value !== 'string') return `Variable '${name}' (TEXT) must be a string.`;
      if (value.trim() === '') return `Variable '${name}' (TEXT) may not be blank.`;
      return { type: 'text', text: value };
    }
    case 'CURRENCY': {
      let amount: number | undefined;
      let code: string | undefined;
      let fallback: string | undefined;
      if (isPlainObject(value)) {
        if (typeof value.amount === 'number' && Number.isFinite(value.amount)) amount = value.amount;
        else if (typeof value.amount === 'string' && /^-?\d+(?:\.\d+)?$/.test(value.amount.trim())) amount = Number(value.amount);
        if (typeof value.code === 'string') code = value.code.trim().toUpperCase();
        if (value.fallback_value !== undefined) {
          if (typeof value.fallback_value !== 'string' || value.fallback_value.trim() === '') {
            return `Variable '${name}' (CURRENCY): fallback_value must be a non-empty string.`;
          }
          fallback = value.fallback_value;
        }
      } else if (typeof value === 'string') {
        const m = CURRENCY_TEXT.exec(value.trim());
        if (m) {
          code = m[1] ?? m[4];
          amount = Number(m[2] ?? m[3]);
        }
      }
      if (amount === undefined || code === undefined || !CURRENCY_CODE.test(code)) {
        return `Variable '${name}' (CURRENCY) must be {"amount": <number>, "code": "<ISO 4217>"} or a string like "ARS 12.50".`;
      }
      const amount1000 = Math.round(amount * 1000);
      if (!Number.isSafeInteger(amount1000)) return `Variable '${name}' (CURRENCY): amount is out of range.`;
      return {
        type: 'currency',
        currency: { fallback_value: fallback ?? `${code} ${formatAmount(amount)}`, code, amount_1000: amount1000 },
      };
    }
    case 'DATE_TIME': {
      if (typeof value === 'string') {
        const v = value.trim();
        // the calendar checked too (a 30 February or a 25th hour is not a date-time; Date.parse rolls them over)
        if (!ISO_DATE_TIME.test(v) || parseIsoInstant(v, { zone: 'utc-if-missing' }) === undefined) {
          return `Variable '${name}' (DATE_TIME) must be an ISO 8601 date or date-time, or {"fallback_value": "<text>"}.`;
        }
        return { type: 'date_time', date_time: { fallback_value: v } };
      }
      if (isPlainObject(value) && typeof value.fallback_value === 'string' && value.fallback_value.trim() !== '') {
        return { type: 'date_time', date_time: { fallback_value: value.fallback_value } };
      }
      return `Variable '${name}' (DATE_TIME) must be an ISO 8601 date or date-time, or {"fallback_value": "<text>"}.`;
    }
    case 'IMAGE':
    case 'VIDEO':
    case 'DOCUMENT': {
      if (typeof value !== 'string' || !isHttpUrl(value.trim())) {
        return `Variable '${name}' (${variable.type}) must be an http(s) URL.`;
      }
      const link = value.trim();
      if (variable.type === 'IMAGE') return { type: 'image', image: { link } };
      if (variable.type === 'VIDEO') return { type: 'video', video: { link } };
      return { type: 'document', document: { link } };
    }
  }
}

const push = (errors: FieldMessages, field: string, message: string) => {
  (errors[field] ??= []).push(message);
};

/** A button variable as sent: a string, or an array holding one string. */
function buttonValue(value: unknown): { value: string } | { error: 'many' | 'invalid' | 'blank' } {
  let v = value;
  if (Array.isArray(v)) {
    if (v.length > 1) return { error: 'many' };
    v = v[0];
  }
  if (typeof v === 'number' && Number.isFinite(v)) v = String(v);
  if (typeof v !== 'string') return { error: 'invalid' };
  if (v.trim() === '') return { error: 'blank' };
  return { value: v };
}

/**
 * Validates `variables` and `button_variables` against the template and builds the components:
 * HEADER (its variable), BODY (ordered by position), then one BUTTON component per button that gets a
 * parameter (`sub_type` url for dynamic URL buttons, quick_reply with a payload; `index` as a string).
 * Errors are keyed by request field (`variables`, `button_variables`), one message per problem.
 */
export function buildComponents(
  template: TemplateShape,
  variables: Record<string, unknown> = {},
  buttonVariables: Record<string, unknown> = {},
): ComponentsResult {
  const errors: FieldMessages = {};
  const owners = buttonVariableOwners(template);
  const ownedNames = new Set([...owners.values()].map((v) => v.name));

  const known = new Set(template.variables.map((v) => v.name));
  for (const key of Object.keys(variables)) {
    if (!known.has(key)) push(errors, 'variables', `Unknown variable '${key}': the template has no such variable.`);
  }

  const parametersOf = (component: 'HEADER' | 'BODY'): TemplateParameter[] => {
    const out: TemplateParameter[] = [];
    const declared = template.variables.filter((v) => v.component === component).sort((a, b) => a.position - b.position);
    for (const v of declared) {
      const value = sent(variables, v.name);
      if (value === undefined || value === null) {
        if (v.isRequired) push(errors, 'variables', `Variable '${v.name}' is required.`);
        continue;
      }
      const p = toParameter(v, value);
      if (typeof p === 'string') push(errors, 'variables', p);
      else out.push(p);
    }
    return out;
  };

  const components: TemplateComponent[] = [];
  const header = parametersOf('HEADER');
  if (header.length > 0) components.push({ type: 'header', parameters: header });
  const body = parametersOf('BODY');
  if (body.length > 0) components.push({ type: 'body', parameters: body });

  // BUTTON variables that describe no dynamic button: a value for them has nowhere to go.
  for (const v of template.variables) {
    if (v.component === 'BUTTON' && !ownedNames.has(v.name) && sent(variables, v.name) !== undefined) {
      push(errors, 'variables', `Variable '${v.name}' belongs to no dynamic URL button of the template.`);
    }
  }

  for (const key of Object.keys(buttonVariables)) {
    const m = BUTTON_KEY.exec(key);
    if (!m) {
      push(errors, 'button_variables', `Invalid key '${key}': use button_0, button_1, ... (button index from 0).`);
      continue;
    }
    const index = Number(m[1]);
    const button = template.buttons[index];
    if (!button) push(errors, 'button_variables', `'${key}': the template has no button ${index}.`);
    else if (!isDynamicUrlButton(button) && button.type !== 'QUICK_REPLY') {
      push(errors, 'button_variables', `'${key}': button ${index} (${button.type}) takes no variable.`);
    }
  }

  template.buttons.forEach((button, index) => {
    const key = `button_${index}`;
    if (isDynamicUrlButton(button)) {
      const owner = owners.get(index);
      const raw = sent(buttonVariables, key) ?? (owner ? sent(variables, owner.name) : undefined);
      if (raw === undefined || raw === null) {
        if (!owner || owner.isRequired) {
          push(errors, 'button_variables', `'${key}' is required: button ${index} is a URL button with a dynamic suffix.`);
        }
        return;
      }
      const b = buttonValue(raw);
      if ('error' in b) {
        push(
          errors,
          'button_variables',
          b.error === 'many'
            ? `'${key}': URL buttons take only 1 variable.`
            : b.error === 'blank'
              ? `'${key}' may not be blank.`
              : `'${key}' must be a string.`,
        );
        return;
      }
      components.push({ type: 'button', sub_type: 'url', index: String(index), parameters: [{ type: 'text', text: b.value }] });
    } else if (button.type === 'QUICK_REPLY') {
      const payload = sent(buttonVariables, key);
      if (payload === undefined || payload === null) return;
      const b = buttonValue(payload);
      if ('error' in b) {
        push(errors, 'button_variables', b.error === 'many' ? `'${key}': a quick reply takes 1 payload.` : `'${key}' must be a non-empty string.`);
        return;
      }
      components.push({ type: 'button', sub_type: 'quick_reply', index: String(index), parameters: [{ type: 'payload', payload: b.value }] });
    }
  });

  return Object.keys(errors).length > 0 ? { ok: false, errors } : { ok: true, components };
}
