/**
 * Permission prompts, pure: from a `mcphost/permissionRequest` to the words and choices a person sees, and from
 * the choice they make to the answer the daemon gets. No vscode API here (src/promptUi.ts shows what this builds).
 *
 * Everything the agent wrote (the reason, the arguments) is untrusted. It only ever goes into plain-text fields
 * (a message, a modal's detail), never into markdown, and it is cut to a bounded length and stripped of control
 * characters so that it cannot push the real question off the screen or fake a line of the prompt.
 */

import type { PermissionRequest, PermissionResponse, Remember } from './protocol';

export type PromptKind = 'notification' | 'modal';

export interface PromptChoice {
  /** The button's label. */
  label: string;
  response: PermissionResponse;
}

export interface PromptSpec {
  kind: PromptKind;
  severity: 'info' | 'warning';
  /** The notification's text, or the modal's headline. Plain text. */
  message: string;
  /** Modal only: the body under the headline. Plain text. */
  detail?: string;
  /** The buttons, in order; the first one of a modal is its default (Enter). */
  choices: PromptChoice[];
  /** What closing the prompt without a choice (Escape, the close button) means. */
  dismissed: PermissionResponse;
}

export const DENY: PermissionResponse = { decision: 'deny', remember: 'once' };

export const LIMITS = {
  /** The reason as shown (the daemon accepts up to 1000 characters). */
  reason: 600,
  /** The reason on a notification (VS Code cuts a notification at 1000 characters). */
  reasonInline: 300,
  /** One warning on a notification (two at most are shown there). */
  warningInline: 150,
  /** The arguments' JSON in a modal. */
  arguments: 1200,
  /** The arguments' JSON on a notification's single line. */
  argumentsInline: 160,
  /** Any other short field (server, tool, sensitivity, client). */
  field: 120,
} as const;

const ALLOW_LABELS: Record<Remember, string> = {
  once: 'Allow once',
  session: 'Allow for this session',
  always: 'Always allow',
};

/** Control characters (C0, DEL, C1) and the Unicode format characters that reorder or hide text. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

function toText(text: unknown): string {
  if (typeof text === 'string') {
    return text;
  }
  if (typeof text === 'number' || typeof text === 'boolean' || typeof text === 'bigint') {
    return String(text);
  }
  if (text === undefined || text === null || typeof text === 'function' || typeof text === 'symbol') {
    return '';
  }
  return JSON.stringify(text) ?? '';
}

/** Untrusted text, made safe to show as plain text: no control or bidi characters, bounded length. */
export function plain(text: unknown, max: number, keepNewlines = false): string {
  let value = toText(text);
  // VS Code turns `[text](https:|command:|file:...)` in a notification into a link: break the pattern.
  value = value.replace(CONTROL, '').replace(/\]\(/g, '] (');
  value = keepNewlines ? value.replace(/\r\n?/g, '\n').replace(/\n{3,}/g, '\n\n') : value.replace(/\s+/g, ' ');
  value = value.trim();
  if (value.length > max) {
    value = `${value.slice(0, max - 1).trimEnd()}…`;
  }
  return value;
}

/** The arguments as compact JSON (or the daemon's preview of them), bounded. */
export function argumentsText(request: PermissionRequest, max: number, pretty = false): string {
  if (request.arguments !== undefined && request.arguments !== null) {
    const json = JSON.stringify(request.arguments, null, pretty ? 2 : undefined);
    return plain(json, max, pretty);
  }
  if (request.arguments_preview) {
    return plain(`${request.arguments_preview}…`, max, pretty);
  }
  return '(none)';
}

export function qualifiedName(request: Pick<PermissionRequest, 'server' | 'tool'>): string {
  return `${plain(request.server, LIMITS.field)}:${plain(request.tool, LIMITS.field)}`;
}

/** Seconds left until `expires_at`, or undefined if it does not parse. */
export function secondsLeft(expiresAt: string, now: Date): number | undefined {
  const end = Date.parse(expiresAt);
  if (Number.isNaN(end)) {
    return undefined;
  }
  return Math.max(0, Math.round((end - now.getTime()) / 1000));
}

function expiryText(request: PermissionRequest, now: Date): string | undefined {
  const left = secondsLeft(request.expires_at, now);
  if (left === undefined) {
    return undefined;
  }
  if (left >= 120) {
    return `waits ${Math.round(left / 60)} min`;
  }
  return `waits ${left} s`;
}

/** Which remember scopes to offer, in order: the daemon's list, known values only, always including once. */
export function rememberChoices(request: PermissionRequest): Remember[] {
  const offered = new Set(Array.isArray(request.remember_options) ? request.remember_options : ['once']);
  const choices: Remember[] = ['once'];
  for (const scope of ['session', 'always'] as const) {
    if (offered.has(scope)) {
      choices.push(scope);
    }
  }
  return choices;
}

/** A destructive call, or any call the policy wants confirmed deliberately, gets the modal. */
export function promptKind(request: PermissionRequest): PromptKind {
  return request.operation === 'destructive' || request.action === 'confirm' ? 'modal' : 'notification';
}

function operationWord(request: PermissionRequest): string {
  switch (request.operation) {
    case 'destructive':
      return 'make a destructive call to';
    case 'write':
      return 'write with';
    case 'read':
      return 'read with';
    default:
      return 'call';
  }
}

function agentName(request: PermissionRequest): string {
  const client = plain(request.client, LIMITS.field);
  return client ? `The agent (${client})` : 'An agent';
}

export function buildPrompt(request: PermissionRequest, now: Date = new Date()): PromptSpec {
  const kind = promptKind(request);
  const name = qualifiedName(request);
  const reason = plain(request.intent?.reason, LIMITS.reason, kind === 'modal');
  const sensitivity = plain(request.intent?.data_sensitivity, LIMITS.field) || 'not declared';
  const warnings = (Array.isArray(request.warnings) ? request.warnings : []).map((w) => plain(w, LIMITS.reason));
  const allow = rememberChoices(request).map(
    (scope): PromptChoice => ({ label: ALLOW_LABELS[scope], response: { decision: 'allow', remember: scope } }),
  );

  if (kind === 'notification') {
    const parts = [`mcphost: ${agentName(request)} wants to ${operationWord(request)} ${name}.`];
    parts.push(`Arguments: ${argumentsText(request, LIMITS.argumentsInline)}.`);
    parts.push(reason ? `Reason given: "${plain(reason, LIMITS.reasonInline)}".` : 'No reason given.');
    parts.push(`Data: ${sensitivity}.`);
    for (const warning of warnings.slice(0, 2)) {
      parts.push(`Warning: ${plain(warning, LIMITS.warningInline)}.`);
    }
    const expiry = expiryText(request, now);
    if (expiry) {
      parts.push(`(${expiry})`);
    }
    return {
      kind,
      severity: warnings.length > 0 ? 'warning' : 'info',
      message: parts.join(' '),
      choices: [...allow, { label: 'Deny', response: DENY }],
      dismissed: DENY,
    };
  }

  const lines: string[] = [];
  lines.push(`Tool: ${name} (${plain(request.variant, LIMITS.field)})`);
  lines.push(`Data sensitivity: ${sensitivity}`);
  lines.push('');
  lines.push("Agent's reason (as the agent wrote it):");
  lines.push(reason || '(no reason given)');
  lines.push('');
  lines.push('Arguments:');
  lines.push(argumentsText(request, LIMITS.arguments, true));
  if (warnings.length > 0) {
    lines.push('');
    for (const warning of warnings) {
      lines.push(`Warning: ${warning}`);
    }
  }
  lines.push('');
  const expiry = expiryText(request, now);
  lines.push(
    `${request.operation === 'destructive' ? 'This call may not be undoable. ' : ''}Deny is the default; ` +
      `closing this dialog denies the call${expiry ? ` (it ${expiry} for an answer)` : ''}.`,
  );
  const headline =
    request.operation === 'destructive'
      ? `mcphost: allow the destructive call ${name}?`
      : `mcphost: confirm the ${plain(request.operation, LIMITS.field)} call ${name}?`;
  return {
    kind,
    severity: 'warning',
    message: headline,
    detail: lines.join('\n'),
    // Deny comes first: it is the dialog's default button, so Enter never allows by reflex.
    choices: [
      { label: 'Deny', response: DENY },
      ...allow.map((choice) => ({ ...choice, label: `${choice.label}: ${name}` })),
    ],
    dismissed: DENY,
  };
}

/** The answer for the button a person clicked (by label), or the dismissal answer for none. */
export function answerFor(spec: PromptSpec, label: string | undefined): PermissionResponse {
  const choice = spec.choices.find((c) => c.label === label);
  return choice ? choice.response : spec.dismissed;
}
