/**
 * Permission prompts, pure: from a `mcphost/permissionRequest` to the words and choices a person sees, and from
 * the choice they make to the answer the daemon gets. No vscode API here (src/promptUi.ts shows what this builds).
 *
 * Everything the agent wrote (the reason, the arguments, its client name) is untrusted. It only ever goes into
 * plain-text fields (a message, a modal's detail), never into markdown, and it is cut to a bounded length and
 * stripped of control characters so that it cannot push the real question off the screen or fake a line of the
 * prompt.
 *
 * What the remember choices are said to cover follows the daemon's grants (mcphost/approval/grants.py): a grant is
 * for one server:tool called through one variant; a session grant holds for the agent session that got it (an
 * agent's connection: it ends when the agent disconnects, and with the daemon), an `always` grant for every agent
 * until it is revoked, and either is dropped when the server changes the tool's description, schema or annotations.
 */

import { type GrantMatch, MATCHES, type PermissionRequest, type PermissionResponse, type Remember } from './protocol';

export type PromptKind = 'notification' | 'modal';

export interface PromptChoice {
  /** The button's label. */
  label: string;
  response: PermissionResponse;
  /** The modal's close button (Escape, the dialog's X): VS Code adds no Cancel of its own beside it. */
  closeAffordance?: boolean;
}

export interface PromptSpec {
  kind: PromptKind;
  /** A notification is always an error-severity one: the only kind VS Code keeps on screen (see promptUi.ts). */
  severity: 'error' | 'warning';
  /** The notification's text, or the modal's headline. Plain text; VS Code shows a notification's newlines as
   * spaces, so a notification is built of short sentences, one thing each. */
  message: string;
  /** The notification's sentences (message is them joined), or the modal's detail lines: for tests and logs. */
  lines: string[];
  /** Modal only: the body under the headline. Plain text. */
  detail?: string;
  /** The buttons, in order. */
  choices: PromptChoice[];
  /** What closing the prompt without a choice (Escape, the close button) means. */
  dismissed: PermissionResponse;
}

export const DENY: PermissionResponse = { decision: 'deny', remember: 'once' };

/** VS Code cuts a notification's message at 1000 characters; the agent's text gives way first to stay under. */
export const NOTIFICATION_MAX = 990;

export const LIMITS = {
  /** The reason as shown (the daemon accepts up to 1000 characters). */
  reason: 600,
  /** The reason on a notification, before the message's budget cuts it further. */
  reasonInline: 240,
  /** One warning on a notification (two at most are shown there). */
  warningInline: 150,
  /** The arguments' JSON in a modal. */
  arguments: 1200,
  /** The arguments' JSON on a notification. */
  argumentsInline: 200,
  /** Any other short field (server, tool, sensitivity, client). */
  field: 120,
  /** A name on a notification (server, tool, the agent's client). */
  fieldInline: 60,
  /** The reason of the rule that asked (the person's own config, but any length). */
  ruleReason: 300,
  /** The rule's reason on a notification, before the message's budget cuts it further. */
  ruleReasonInline: 160,
  /** String arguments offered for a pattern grant, and the longest argument name the daemon takes. */
  patternArguments: 20,
  argumentName: 200,
} as const;

const ALLOW_LABELS: Record<Remember, string> = {
  once: 'Allow once',
  session: 'Allow for this session',
  always: 'Always allow',
};

/**
 * Control characters (C0, DEL, C1) and the Unicode characters that reorder or hide text: bidi and zero-width marks,
 * the soft hyphen, Hangul fillers, tag characters (text a model reads and a person never sees), as the daemon's
 * terminal output escapes them (mcphost/console.py).
 */
const CONTROL =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\u3164\ufeff\uffa0]|\udb40[\udc00-\udc7f\udd00-\uddef]/g;

/** A run of spaces an agent can pad a value with, to push its end past the cut. */
const SPACE_RUN = / {4,}/g;

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
  value = keepNewlines
    ? value
        .replace(/\r\n?/g, '\n')
        .replace(/\n{3,}/g, '\n\n')
        .replace(SPACE_RUN, (run) => (run.length > 12 ? `␠×${run.length}` : run))
    : value.replace(/\s+/g, ' ');
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

export function qualifiedName(request: Pick<PermissionRequest, 'server' | 'tool'>, max: number = LIMITS.field): string {
  return `${plain(request.server, max)}:${plain(request.tool, max)}`;
}

/** Seconds left until `expires_at`, or undefined if it does not parse. */
export function secondsLeft(expiresAt: string, now: Date): number | undefined {
  const end = Date.parse(expiresAt);
  if (Number.isNaN(end)) {
    return undefined;
  }
  return Math.max(0, Math.round((end - now.getTime()) / 1000));
}

function waitText(request: PermissionRequest, now: Date): string | undefined {
  const left = secondsLeft(request.expires_at, now);
  if (left === undefined) {
    return undefined;
  }
  return left >= 120 ? `${Math.round(left / 60)} min` : `${left} s`;
}

/** How long nobody must have typed before a modal prompt opens (see promptUi.ts). */
export const TYPING_QUIET_MS = 1500;

/** Milliseconds still to wait for a pause in typing, after the last edit at `lastEditAt` (0: open now). */
export function typingPause(lastEditAt: number | undefined, now: number, quietMs: number = TYPING_QUIET_MS): number {
  if (lastEditAt === undefined) {
    return 0;
  }
  return Math.max(0, lastEditAt + quietMs - now);
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

/** The narrowings of a remembered allow the daemon offers for this call (known values, in order); a pattern only
 * when the person can see a string argument to put a glob on. Tool alone (or nothing) means nothing to ask. */
export function matchChoices(request: PermissionRequest): GrantMatch[] {
  const offered = new Set(Array.isArray(request.match_options) ? request.match_options : []);
  const choices = MATCHES.filter((match) => offered.has(match));
  if (choices.includes('pattern') && patternArguments(request).length === 0) {
    return choices.filter((match) => match !== 'pattern');
  }
  return choices;
}

/** Whether a remembered allow is followed by the question of what it covers. */
export function scopeOffered(request: PermissionRequest): boolean {
  return matchChoices(request).some((match) => match !== 'tool');
}

/**
 * The string arguments a pattern may put a glob on, with their values as the person sees them: not one redaction
 * changed (the daemon matches the real value, the prompt could only check the placeholder), none when the arguments
 * were too large to send.
 */
export function patternArguments(request: PermissionRequest): { name: string; value: string }[] {
  const args = request.arguments;
  if (args === null || args === undefined || typeof args !== 'object' || Array.isArray(args)) {
    return [];
  }
  const out: { name: string; value: string }[] = [];
  for (const [name, value] of Object.entries(args)) {
    if (typeof value === 'string' && !value.includes('[REDACTED') && name.length > 0 && name.length <= LIMITS.argumentName) {
      out.push({ name, value });
      if (out.length >= LIMITS.patternArguments) {
        break;
      }
    }
  }
  return out;
}

/** Which rule asked, and its reason: "Asked by rules[2]: edits outside the workspace." (undefined: not said). */
export function ruleText(
  request: Pick<PermissionRequest, 'rule' | 'rule_reason'>,
  reasonMax: number = LIMITS.ruleReason,
  nameMax: number = LIMITS.fieldInline,
): string | undefined {
  const rule = plain(request.rule, nameMax);
  if (!rule) {
    return undefined;
  }
  const reason = plain(request.rule_reason, reasonMax).replace(/[.\s]+$/, '');
  return reason ? `Asked by ${rule}: ${reason}.` : `Asked by ${rule}.`;
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

/** Who asks: the agent's MCP client as it named itself (its own words, so quoted), or that it gave no name. */
export function agentName(request: Pick<PermissionRequest, 'client'>, max: number = LIMITS.field): string {
  const client = plain(request.client, max);
  return client ? `agent "${client}"` : 'an agent that gave no name';
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** What a grant is keyed on besides the tool: the variant the agent called ("write calls", "destructive calls"). */
function callsWord(request: PermissionRequest): string {
  const kind = /^call_tool_(\w+)$/.exec(request.variant)?.[1];
  return kind ? `${plain(kind, 20)} calls` : `calls through ${plain(request.variant, LIMITS.field)}`;
}

/** The hints the server gave (as mcphost acts on them, after config overrides), in words. */
export function annotationsText(annotations: unknown): string {
  const hints = typeof annotations === 'object' && annotations !== null ? (annotations as Record<string, unknown>) : {};
  const words: string[] = [];
  const hint = (key: string, yes: string, no?: string) => {
    if (hints[key] === true) {
      words.push(yes);
    } else if (hints[key] === false && no) {
      words.push(no);
    }
  };
  hint('readOnlyHint', 'read-only', 'not read-only');
  hint('destructiveHint', 'destructive', 'not destructive');
  hint('idempotentHint', 'idempotent');
  hint('openWorldHint', 'open world', 'closed world');
  return words.length > 0 ? words.join(', ') : 'none given';
}

function recommendationText(request: PermissionRequest): string {
  const callWith = plain(request.call_with, LIMITS.fieldInline);
  if (!callWith) {
    return '';
  }
  const variant = plain(request.variant, LIMITS.fieldInline);
  return callWith === variant ? `mcphost recommends ${callWith}` : `mcphost recommends ${callWith}, not ${variant}`;
}

/** What each remember choice on offer covers, one sentence each. */
function scopeLines(request: PermissionRequest, tool: string, quote: (label: string) => string): string[] {
  const calls = callsWord(request);
  const lines: string[] = [];
  for (const scope of rememberChoices(request)) {
    if (scope === 'session') {
      lines.push(`${quote(ALLOW_LABELS.session)} covers ${calls} to ${tool} from this agent session, until it disconnects.`);
    } else if (scope === 'always') {
      lines.push(
        `${quote(ALLOW_LABELS.always)} covers ${calls} to ${tool} from any agent, until revoked or the server changes ` +
          'the tool.',
      );
    }
  }
  return lines;
}

interface InlineBudget {
  reason: number;
  args: number;
  warning: number;
}

/** Where a call stands in a batch answered one by one. */
export interface BatchPosition {
  index: number;
  count: number;
}

function positionText(position: BatchPosition | undefined): string | undefined {
  return position ? `Call ${position.index + 1} of ${position.count} that asked together, one by one.` : undefined;
}

const MATCH_WORDS: Record<GrantMatch, string> = {
  tool: 'any arguments',
  arguments: 'these exact arguments',
  pattern: 'a pattern',
};

/** What the scope question that follows a remembered allow offers, in a sentence (undefined: no question). */
function scopeQuestionText(request: PermissionRequest): string | undefined {
  if (!scopeOffered(request)) {
    return undefined;
  }
  const words = matchChoices(request).map((match) => MATCH_WORDS[match]);
  const list = words.length > 1 ? `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}` : words.join('');
  return `Remembering asks what it covers next: ${list}.`;
}

interface NotificationBudget extends InlineBudget {
  /** The rule's reason. */
  ruleReason: number;
  /** Names: the agent's client, the server, the tool, the rule. */
  name: number;
}

function notificationLines(request: PermissionRequest, now: Date, budget: NotificationBudget, position?: BatchPosition): string[] {
  const server = plain(request.server, budget.name);
  const tool = plain(request.tool, budget.name);
  const reason = plain(request.intent?.reason, budget.reason);
  const sensitivity = plain(request.intent?.data_sensitivity, LIMITS.fieldInline) || 'not declared';
  const warnings = Array.isArray(request.warnings) ? request.warnings : [];
  const lines = [
    `mcphost: ${capitalized(agentName(request, budget.name))} asks to ${operationWord(request)} tool ${tool} ` +
      `of server ${server}.`,
  ];
  const where = positionText(position);
  if (where) {
    lines.push(where);
  }
  const rule = ruleText(request, budget.ruleReason, budget.name);
  if (rule) {
    lines.push(rule);
  }
  lines.push(
    `Arguments: ${argumentsText(request, budget.args)}.`,
    reason ? `Reason (the agent's words): "${reason}".` : 'No reason given.',
    `Data: ${sensitivity}.`,
  );
  const recommendation = recommendationText(request);
  lines.push(`Server annotations: ${annotationsText(request.annotations)}${recommendation ? `; ${recommendation}` : ''}.`);
  for (const warning of warnings.slice(0, 2)) {
    lines.push(`Warning: ${plain(warning, budget.warning)}.`);
  }
  if (warnings.length > 2) {
    lines.push(`(${warnings.length - 2} more warnings in the daemon log.)`);
  }
  lines.push(...scopeLines(request, tool, (label) => `"${label}"`));
  const question = scopeQuestionText(request);
  if (question) {
    lines.push(question);
  }
  const wait = waitText(request, now);
  lines.push(`Closing this denies.${wait ? ` Waits ${wait} for an answer.` : ''}`);
  return lines;
}

function buildNotification(request: PermissionRequest, now: Date, allow: PromptChoice[], position?: BatchPosition): PromptSpec {
  const budget: NotificationBudget = {
    reason: LIMITS.reasonInline,
    args: LIMITS.argumentsInline,
    warning: LIMITS.warningInline,
    ruleReason: LIMITS.ruleReasonInline,
    name: LIMITS.fieldInline,
  };
  let lines = notificationLines(request, now, budget, position);
  const tooLong = () => lines.join(' ').length > NOTIFICATION_MAX;
  // Past VS Code's limit the end is cut, and the end says what the buttons mean: the agent's own text gives way
  // first, then the reason from the person's config, then long names.
  while (tooLong() && budget.reason + budget.args + budget.warning > 90) {
    const agentText: (keyof InlineBudget)[] = ['reason', 'args', 'warning'];
    const largest = agentText.reduce((a, b) => (budget[a] >= budget[b] ? a : b));
    budget[largest] = Math.max(30, Math.floor(budget[largest] * 0.8));
    lines = notificationLines(request, now, budget, position);
  }
  while (tooLong() && budget.ruleReason > 30) {
    budget.ruleReason = Math.max(30, Math.floor(budget.ruleReason * 0.7));
    lines = notificationLines(request, now, budget, position);
  }
  while (tooLong() && budget.name > 24) {
    budget.name = Math.max(24, Math.floor(budget.name * 0.8));
    lines = notificationLines(request, now, budget, position);
  }
  return {
    kind: 'notification',
    severity: 'error',
    message: lines.join(' '),
    lines,
    choices: [...allow, { label: 'Deny', response: DENY }],
    dismissed: DENY,
  };
}

function buildModal(request: PermissionRequest, now: Date, allow: PromptChoice[], position?: BatchPosition): PromptSpec {
  const name = qualifiedName(request);
  const tool = plain(request.tool, LIMITS.field);
  const reason = plain(request.intent?.reason, LIMITS.reason, true);
  const sensitivity = plain(request.intent?.data_sensitivity, LIMITS.field) || 'not declared';
  const warnings = (Array.isArray(request.warnings) ? request.warnings : []).map((w) => plain(w, LIMITS.reason));
  const recommendation = recommendationText(request);
  const lines: string[] = [];
  const where = positionText(position);
  if (where) {
    lines.push(where, '');
  }
  lines.push(`Agent: ${plain(request.client, LIMITS.field) || '(it gave no name)'}`);
  lines.push(`Server: ${plain(request.server, LIMITS.field)}`);
  lines.push(`Tool: ${tool} (called as ${plain(request.variant, LIMITS.field)})`);
  lines.push(`Server annotations: ${annotationsText(request.annotations)}`);
  if (recommendation) {
    lines.push(recommendation);
  }
  lines.push(`Data sensitivity: ${sensitivity}`);
  const rule = ruleText(request);
  if (rule) {
    lines.push(rule);
  }
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
  lines.push(`"${ALLOW_LABELS.once}" allows this call only.`);
  lines.push(...scopeLines(request, tool, (label) => `"${label}"`));
  const question = scopeQuestionText(request);
  if (question) {
    lines.push(question);
  }
  const wait = waitText(request, now);
  lines.push(
    `${request.operation === 'destructive' ? 'This call may not be undoable. ' : ''}Deny, Escape or closing this ` +
      `dialog denies the call${wait ? ` (it waits ${wait} for an answer)` : ''}.`,
  );
  const agent = agentName(request);
  const headline =
    request.operation === 'destructive'
      ? `mcphost: ${capitalized(agent)} asks to make a destructive call to ${name}. Allow it?`
      : `mcphost: ${capitalized(agent)} asks to confirm the ${plain(request.operation, LIMITS.field)} call ${name}.` +
        ' Allow it?';
  return {
    kind: 'modal',
    severity: 'warning',
    message: headline,
    lines,
    detail: lines.join('\n'),
    // Deny is the dialog's close button: Escape and the X deny, and VS Code shows no Cancel that would leave the
    // person guessing whether cancelling denies or only puts the question off.
    choices: [
      ...allow.map((choice) => ({ ...choice, label: `${choice.label}: ${name}` })),
      { label: 'Deny', response: DENY, closeAffordance: true },
    ],
    dismissed: DENY,
  };
}

/** The prompt for one call (`position`: where it stands in a batch answered one by one). */
export function buildPrompt(request: PermissionRequest, now: Date = new Date(), position?: BatchPosition): PromptSpec {
  const allow = rememberChoices(request).map(
    (scope): PromptChoice => ({ label: ALLOW_LABELS[scope], response: { decision: 'allow', remember: scope } }),
  );
  return promptKind(request) === 'notification'
    ? buildNotification(request, now, allow, position)
    : buildModal(request, now, allow, position);
}

/** The answer for the button a person clicked (by label), or the dismissal answer for none. */
export function answerFor(spec: PromptSpec, label: string | undefined): PermissionResponse {
  const choice = spec.choices.find((c) => c.label === label);
  return choice ? choice.response : spec.dismissed;
}
