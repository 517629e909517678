/**
 * Activity records, pure: how one record reads in the activity view (label, description, tooltip, icon), the
 * intent filter, and the newest-first bounded list the view shows. src/activityView.ts turns these into tree items.
 *
 * A record holds agent-written text (the reason, arguments, the response preview). It is only ever shown as plain
 * text: tooltips are plain strings, never MarkdownString.
 */

import type { ActivityRecord, PendingPrompt, PermissionRequest } from './protocol';
import { agentName, plain, ruleText } from './prompts';

export const INTENTS = ['read', 'write', 'destructive'] as const;
export type Intent = (typeof INTENTS)[number];
/** The view's filter: one intent, or every record. */
export type IntentFilter = Intent | 'all';

/** A codicon id and a theme color id, for a ThemeIcon. */
export interface IconSpec {
  id: string;
  color?: string;
}

export interface RecordView {
  label: string;
  description: string;
  tooltip: string;
  icon: IconSpec;
  /** For context menus and tests. */
  intent: Intent | undefined;
}

/**
 * One icon and colour per outcome, so that a denied and an allowed call never look alike; the intent is a word in
 * the description instead (and the view's filter).
 */
const OUTCOME_ICONS: Record<string, IconSpec> = {
  success: { id: 'pass', color: 'testing.iconPassed' },
  denied: { id: 'circle-slash', color: 'errorForeground' },
  rejected: { id: 'warning', color: 'charts.orange' },
  error: { id: 'error', color: 'errorForeground' },
  expired: { id: 'watch', color: 'disabledForeground' },
  cancelled: { id: 'close', color: 'disabledForeground' },
  started: { id: 'sync~spin', color: 'charts.blue' },
  // hook_decision records: an agent's own tool, let through here or handed to the agent's own prompt
  allowed: { id: 'pass', color: 'testing.iconPassed' },
  asked: { id: 'comment-discussion', color: 'charts.blue' },
};

/** A prompt that waits for a person's answer. */
export const WAITING_ICON: IconSpec = { id: 'bell-dot', color: 'list.warningForeground' };

const EVENT_ICONS: Record<string, IconSpec> = {
  config_reload: { id: 'settings-gear' },
  config_error: { id: 'error', color: 'errorForeground' },
  upstream_connected: { id: 'plug' },
  upstream_lost: { id: 'debug-disconnect', color: 'errorForeground' },
  annotations_changed: { id: 'tag' },
};

const STATUS_WORDS: Record<string, string> = {
  success: 'ok',
  error: 'error',
  rejected: 'rejected',
  denied: 'denied',
  expired: 'expired',
  cancelled: 'cancelled',
  started: 'running',
  allowed: 'allowed',
  asked: "asked in the agent's prompt",
};

export function variantIntent(variant: string | null | undefined): Intent | undefined {
  return INTENTS.find((intent) => variant === `call_tool_${intent}`);
}

/** The call's intent: the variant it was made with, else the declared operation type. */
export function recordIntent(record: ActivityRecord): Intent | undefined {
  const fromVariant = variantIntent(record.metadata?.tool_variant);
  if (fromVariant) {
    return fromVariant;
  }
  const declared = record.metadata?.intent?.operation_type ?? '';
  return (INTENTS as readonly string[]).includes(declared) ? (declared as Intent) : undefined;
}

export function matchesFilter(record: ActivityRecord, filter: IntentFilter): boolean {
  return filter === 'all' || recordIntent(record) === filter;
}

export function waitingMatchesFilter(prompt: PendingPrompt, filter: IntentFilter): boolean {
  return filter === 'all' || variantIntent(prompt.variant) === filter;
}

/** HH:MM:SS in the given time zone offset (minutes east of UTC, as `-Date.getTimezoneOffset()`); today's date
 * is left out, another day's is put in front. */
export function formatTime(timestamp: string, now: Date, offsetMinutes = -now.getTimezoneOffset()): string {
  const at = Date.parse(timestamp);
  if (Number.isNaN(at)) {
    return plain(timestamp, 40);
  }
  const local = new Date(at + offsetMinutes * 60_000);
  const today = new Date(now.getTime() + offsetMinutes * 60_000);
  const pad = (n: number) => String(n).padStart(2, '0');
  const time = `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}`;
  const sameDay =
    local.getUTCFullYear() === today.getUTCFullYear() &&
    local.getUTCMonth() === today.getUTCMonth() &&
    local.getUTCDate() === today.getUTCDate();
  if (sameDay) {
    return time;
  }
  return `${local.getUTCFullYear()}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())} ${time}`;
}

/** A duration as a person reads it, to the millisecond under a minute: 0.4 ms, 12.5 ms, 837 ms, 1.234 s, 2 min 5.3 s. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === undefined || ms === null || !Number.isFinite(ms) || ms < 0) {
    return '';
  }
  if (ms < 100) {
    return `${Number(ms.toFixed(1))} ms`;
  }
  if (ms < 1000) {
    return `${Math.round(ms)} ms`;
  }
  if (ms < 60_000) {
    return `${Number((ms / 1000).toFixed(3))} s`;
  }
  const minutes = Math.floor(ms / 60_000);
  const seconds = Number(((ms - minutes * 60_000) / 1000).toFixed(1));
  return `${minutes} min ${seconds} s`;
}

function statusWord(record: ActivityRecord): string {
  const status = record.status ?? '';
  return STATUS_WORDS[status] ?? plain(status, 20);
}

function decisionText(record: ActivityRecord): string {
  const decision = record.decision;
  if (!decision) {
    return '';
  }
  const by = plain(decision.by, 40).replace(/_/g, ' ');
  const remember = decision.remember ? `, ${plain(decision.remember, 20)}` : '';
  // A remembered allow narrowed to exact arguments or a pattern, and an answer given to a batch of calls.
  const match = decision.match ? ` (${plain(decision.match, 20)})` : '';
  const batch = decision.batch ? ', in a batch' : '';
  return `${plain(decision.outcome, 20)} by ${by}${remember}${match}${batch}`;
}

function eventLabel(record: ActivityRecord): string {
  const type = plain(record.type, 60).replace(/_/g, ' ');
  return record.server ? `${type}: ${plain(record.server, 80)}` : type;
}

/** A call's record: its outcome, or its start (a write or destructive call forwarded and under way), or the
 * decision on one of the agent's own tools that its hook asked about. */
function isCall(record: ActivityRecord): boolean {
  return record.type === 'tool_call' || record.type === 'tool_call_started' || record.type === 'hook_decision';
}

export function iconFor(record: ActivityRecord): IconSpec {
  if (!isCall(record)) {
    return EVENT_ICONS[record.type] ?? { id: 'info' };
  }
  return OUTCOME_ICONS[record.status ?? ''] ?? { id: 'question' };
}

/** A row for a prompt that waits for an answer (from the daemon's status), with what this editor knows of it. */
export function formatWaiting(prompt: PendingPrompt, request: PermissionRequest | undefined, now: Date = new Date()): RecordView {
  const name = `${plain(prompt.server, 80)}:${plain(prompt.tool, 80)}`;
  const intent = variantIntent(prompt.variant);
  const until = formatTime(prompt.expires_at, now);
  const description = ['waiting for an answer', intent, `until ${until}`].filter(Boolean).join(' · ');
  const lines = [`${name} (${plain(prompt.variant, 40)})`, `waiting for an answer, until ${plain(prompt.expires_at, 40)}`];
  if (request) {
    lines.push(`asked by: ${agentName(request)}`);
    const rule = ruleText(request);
    if (rule) {
      lines.push(rule);
    }
    if (request.intent?.reason) {
      lines.push(`reason (agent's words): ${plain(request.intent.reason, 300)}`);
    }
    lines.push('Click to show the prompt.');
  } else {
    lines.push('The prompt is shown in another editor or in `mcphost approve`.');
  }
  return { label: name, description, tooltip: lines.join('\n'), icon: WAITING_ICON, intent };
}

export function formatRecord(record: ActivityRecord, now: Date = new Date()): RecordView {
  const time = formatTime(record.timestamp, now);
  const intent = recordIntent(record);
  if (!isCall(record)) {
    const label = eventLabel(record);
    const lines = [label, `at ${plain(record.timestamp, 40)}`];
    if (record.error?.message) {
      lines.push(plain(record.error.message, 500, true));
    }
    return { label, description: time, tooltip: lines.join('\n'), icon: iconFor(record), intent };
  }
  const name = `${plain(record.server ?? '?', 80)}:${plain(record.tool ?? '?', 80)}`;
  const status = statusWord(record);
  const duration = formatDuration(record.duration_ms);
  // The duration before the time: a narrow side bar cuts the description's end, and the time is in the tooltip.
  const description = [status, duration, intent, time].filter(Boolean).join(' · ');
  const lines = [
    `${name} (${plain(record.metadata?.tool_variant ?? 'unknown variant', 40)})`,
    `status: ${status}${record.error ? ` (${plain(record.error.code, 40)})` : ''}`,
    `at ${plain(record.timestamp, 40)}${duration ? `, took ${duration}` : ''}`,
  ];
  const decision = decisionText(record);
  if (decision) {
    lines.push(`decision: ${decision}`);
  }
  const declared = record.metadata?.intent;
  if (declared?.data_sensitivity) {
    lines.push(`data: ${plain(declared.data_sensitivity, 40)}`);
  }
  if (declared?.reason) {
    lines.push(`reason (agent's words): ${plain(declared.reason, 300)}`);
  }
  if (record.error?.message) {
    lines.push(`error: ${plain(record.error.message, 300)}`);
  }
  for (const warning of record.warnings ?? []) {
    lines.push(`warning: ${plain(warning, 200)}`);
  }
  lines.push('Click for the full record.');
  return { label: name, description, tooltip: lines.join('\n'), icon: iconFor(record), intent };
}

/** The view's list: newest first (by ULID id, which sorts by time), one entry per id, at most `max`. */
export class RecordList {
  private records: ActivityRecord[] = [];
  /** Starts of write and destructive calls whose outcome has arrived: a late start must not come back. */
  private readonly answered = new Set<string>();

  constructor(private max: number) {}

  setMax(max: number): void {
    this.max = Math.max(1, Math.floor(max));
    this.records.length = Math.min(this.records.length, this.max);
  }

  /** Adds a record; returns false if it was already there. */
  add(record: ActivityRecord): boolean {
    if (this.records.some((r) => r.id === record.id)) {
      return false;
    }
    if (record.type === 'tool_call_started' && this.answered.has(record.id)) {
      return false;
    }
    if (record.started_id) {
      // A call's outcome takes the place of its start (a row saying it was forwarded and is under way).
      this.answered.add(record.started_id);
      if (this.answered.size > 10 * this.max) {
        this.answered.delete(this.answered.values().next().value as string);
      }
      this.records = this.records.filter((r) => r.id !== record.started_id);
    }
    // Records arrive in order almost always; a late one is put where its id sorts.
    let index = 0;
    while (index < this.records.length && compareNewestFirst(this.records[index], record) < 0) {
      index += 1;
    }
    this.records.splice(index, 0, record);
    if (this.records.length > this.max) {
      this.records.length = this.max;
    }
    return true;
  }

  clear(): void {
    this.records = [];
    this.answered.clear();
  }

  get(id: string): ActivityRecord | undefined {
    return this.records.find((r) => r.id === id);
  }

  list(filter: IntentFilter = 'all'): ActivityRecord[] {
    return this.records.filter((r) => matchesFilter(r, filter));
  }

  get size(): number {
    return this.records.length;
  }
}

function compareNewestFirst(a: ActivityRecord, b: ActivityRecord): number {
  const byTime = Date.parse(b.timestamp) - Date.parse(a.timestamp);
  if (byTime !== 0 && !Number.isNaN(byTime)) {
    return byTime;
  }
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

export function filterLabel(filter: IntentFilter): string {
  return filter === 'all' ? 'all intents' : `${filter} calls`;
}
