/**
 * Batch prompts, pure: from a `mcphost/permissionBatch` (calls from one agent session that asked within a short
 * window) to the words and buttons a person sees, and from their choice to the answers the daemon gets. No vscode API
 * here (src/promptUi.ts shows what this builds).
 *
 * - Only reads and writes that a quick yes or no may answer: one error-severity notification (it stays on screen,
 *   as a write prompt does), listing every call, with Allow all / Deny all / One by one.
 * - Any destructive call, or any call the policy wants confirmed: a modal whose detail lists every call and whose
 *   allow button names each of those calls. A destructive call is never allowed without the person seeing its name on
 *   what they pressed, and the answers carry that name (`confirmed`, the daemon's proof of it).
 *
 * "One by one" shows each call with the ordinary prompt, remember choices and all; Allow all and Deny all answer each
 * call once. A call left without an answer is denied, and so is every call when the prompt is closed.
 */

import {
  DENY,
  LIMITS,
  NOTIFICATION_MAX,
  type PromptKind,
  agentName,
  argumentsText,
  plain,
  promptKind,
  qualifiedName,
  ruleText,
  secondsLeft,
} from './prompts';
import type { BatchAnswer, PermissionBatch, PermissionRequest, PermissionResponse } from './protocol';

export type BatchAction = 'allowAll' | 'denyAll' | 'oneByOne';

export interface BatchChoice {
  label: string;
  action: BatchAction;
  /** The modal's close button (Escape, the X). */
  closeAffordance?: boolean;
}

export interface BatchSpec {
  kind: PromptKind;
  severity: 'error' | 'warning';
  /** The notification's text, or the modal's headline (plain text). */
  message: string;
  /** The notification's sentences, or the modal's detail lines. */
  lines: string[];
  /** Modal only: the body under the headline. */
  detail?: string;
  choices: BatchChoice[];
  /** Closing it without a choice. */
  dismissed: BatchAction;
}

export const BATCH_LIMITS = {
  /** One call's arguments on the notification, before the budget cuts them further. */
  argumentsInline: 120,
  /** Calls listed on the notification at most (the rest: "and N more"). */
  callsInline: 8,
  /** One call's arguments in the modal. */
  arguments: 400,
  /** One call's reason in the modal. */
  reason: 300,
  /** The rule's reason of one call, in the modal. */
  ruleReason: 200,
} as const;

export const BATCH_LABELS = { allowAll: 'Allow all', denyAll: 'Deny all', oneByOne: 'One by one' } as const;

/** A call that a batch may allow only by naming it: destructive, or one the policy wants confirmed. */
export function needsNaming(request: PermissionRequest): boolean {
  return promptKind(request) === 'modal';
}

/** The name a destructive call's allow must carry (`confirmed`): the request's own server and tool, exactly. */
export function confirmedName(request: Pick<PermissionRequest, 'server' | 'tool'>): string {
  return `${request.server}:${request.tool}`;
}

export function batchKind(batch: PermissionBatch): PromptKind {
  return batch.requests.some(needsNaming) ? 'modal' : 'notification';
}

/** The agent's name, from the batch or (older daemons) its first call. */
function batchAgent(batch: PermissionBatch, max: number): string {
  return agentName({ client: batch.client ?? batch.requests[0]?.client }, max);
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function operationOf(request: PermissionRequest): string {
  return plain(request.operation, 20) || 'call';
}

/** The calls that need naming, each name once with how many calls it stands for: "fs:remove (2 calls)". */
function namedCalls(requests: PermissionRequest[], max: number): string[] {
  const counts = new Map<string, number>();
  for (const request of requests.filter(needsNaming)) {
    const name = qualifiedName(request, max);
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return [...counts].map(([name, count]) => (count > 1 ? `${name} (${count} calls)` : name));
}

/** The allow button of a batch modal, naming every destructive (or to-be-confirmed) call. */
export function allowAllLabel(batch: PermissionBatch): string {
  const destructive = namedCalls(
    batch.requests.filter((r) => r.operation === 'destructive'),
    LIMITS.fieldInline,
  );
  const confirm = namedCalls(
    batch.requests.filter((r) => r.operation !== 'destructive'),
    LIMITS.fieldInline,
  );
  const parts: string[] = [];
  if (destructive.length > 0) {
    parts.push(`destructive ${destructive.join(', ')}`);
  }
  if (confirm.length > 0) {
    parts.push(`${confirm.join(', ')} to confirm`);
  }
  const count = batch.requests.length;
  return parts.length > 0 ? `Allow all ${count}, including ${parts.join('; ')}` : `Allow all ${count}`;
}

function ruleOf(request: PermissionRequest, reasonMax: number): string | undefined {
  return ruleText(request, reasonMax)?.replace(/^Asked by /, '');
}

/** "Asked by X." once when every call was asked by the same rule, else undefined (each call then says its own). */
function commonRule(requests: PermissionRequest[], reasonMax: number): string | undefined {
  const rules = new Set(requests.map((r) => ruleText(r, reasonMax) ?? ''));
  const [only] = rules;
  return rules.size === 1 && only ? only : undefined;
}

function waitText(expiresAt: string, now: Date): string | undefined {
  const left = secondsLeft(expiresAt, now);
  if (left === undefined) {
    return undefined;
  }
  return left >= 120 ? `${Math.round(left / 60)} min` : `${left} s`;
}

function notificationLines(batch: PermissionBatch, now: Date, argsMax: number, shown: number, ruleMax: number): string[] {
  const requests = batch.requests;
  const common = commonRule(requests, ruleMax);
  const lines = [
    `mcphost: ${capitalized(batchAgent(batch, LIMITS.fieldInline))} asks to make ${requests.length} calls at once.`,
  ];
  requests.slice(0, shown).forEach((request, index) => {
    const own = common ? '' : ` (asked by ${ruleOf(request, ruleMax) ?? 'the policy'})`;
    const args = argumentsText(request, argsMax);
    lines.push(`${index + 1}. ${operationOf(request)} ${qualifiedName(request, LIMITS.fieldInline)} ${args}${own}.`);
  });
  if (requests.length > shown) {
    lines.push(`And ${requests.length - shown} more (One by one shows each).`);
  }
  if (common) {
    lines.push(common);
  }
  lines.push(
    `"${BATCH_LABELS.allowAll}" allows each call once; "${BATCH_LABELS.denyAll}" denies each; ` +
      `"${BATCH_LABELS.oneByOne}" shows each call in full (the agent's reasons too) to answer on its own.`,
  );
  const wait = waitText(batch.expires_at, now);
  lines.push(`Closing this denies them all.${wait ? ` Waits ${wait} for an answer.` : ''}`);
  return lines;
}

function buildNotification(batch: PermissionBatch, now: Date): BatchSpec {
  let argsMax: number = BATCH_LIMITS.argumentsInline;
  let shown = Math.min(batch.requests.length, BATCH_LIMITS.callsInline);
  let ruleMax: number = LIMITS.ruleReasonInline;
  let lines = notificationLines(batch, now, argsMax, shown, ruleMax);
  // The agent's arguments give way first, then the number of calls listed, then the rules' reasons.
  while (lines.join(' ').length > NOTIFICATION_MAX) {
    if (argsMax > 30) {
      argsMax = Math.max(30, Math.floor(argsMax * 0.8));
    } else if (shown > 2) {
      shown -= 1;
    } else if (ruleMax > 20) {
      ruleMax = Math.max(20, Math.floor(ruleMax * 0.7));
    } else {
      break;
    }
    lines = notificationLines(batch, now, argsMax, shown, ruleMax);
  }
  return {
    kind: 'notification',
    severity: 'error',
    message: lines.join(' '),
    lines,
    choices: [
      { label: BATCH_LABELS.allowAll, action: 'allowAll' },
      { label: BATCH_LABELS.denyAll, action: 'denyAll' },
      { label: BATCH_LABELS.oneByOne, action: 'oneByOne' },
    ],
    dismissed: 'denyAll',
  };
}

function buildModal(batch: PermissionBatch, now: Date): BatchSpec {
  const requests = batch.requests;
  const destructive = requests.filter((r) => r.operation === 'destructive').length;
  const allow = allowAllLabel(batch);
  const lines: string[] = [];
  lines.push(`Agent: ${plain(batch.client ?? requests[0]?.client, LIMITS.field) || '(it gave no name)'}`);
  lines.push(`${requests.length} calls, in the order they asked:`);
  requests.forEach((request, index) => {
    lines.push('');
    const how = `${operationOf(request)}, called as ${plain(request.variant, LIMITS.field)}`;
    const mark = request.operation === 'destructive' ? 'DESTRUCTIVE ' : needsNaming(request) ? 'TO CONFIRM ' : '';
    lines.push(`${index + 1}. ${mark}${qualifiedName(request)} (${how})`);
    lines.push(`   Arguments: ${argumentsText(request, BATCH_LIMITS.arguments)}`);
    const reason = plain(request.intent?.reason, BATCH_LIMITS.reason);
    lines.push(reason ? `   Reason (the agent's words): ${reason}` : '   No reason given.');
    const rule = ruleText(request, BATCH_LIMITS.ruleReason);
    if (rule) {
      lines.push(`   ${rule}`);
    }
    for (const warning of (Array.isArray(request.warnings) ? request.warnings : []).slice(0, 3)) {
      lines.push(`   Warning: ${plain(warning, LIMITS.warningInline)}`);
    }
  });
  lines.push('');
  lines.push(`"${allow}" allows each call once.`);
  lines.push(`"${BATCH_LABELS.oneByOne}" asks about each call on its own, with the choices to remember.`);
  const wait = waitText(batch.expires_at, now);
  lines.push(
    `${destructive > 0 ? 'Destructive calls may not be undoable. ' : ''}${BATCH_LABELS.denyAll}, Escape or closing this ` +
      `dialog denies every call${wait ? ` (the first waits ${wait} for an answer)` : ''}.`,
  );
  const agent = capitalized(batchAgent(batch, LIMITS.field));
  const some = destructive > 0 ? `${destructive} of them destructive` : `${requests.filter(needsNaming).length} of them to confirm`;
  return {
    kind: 'modal',
    severity: 'warning',
    message: `mcphost: ${agent} asks to make ${requests.length} calls at once, ${some}. Allow them?`,
    lines,
    detail: lines.join('\n'),
    choices: [
      { label: allow, action: 'allowAll' },
      { label: BATCH_LABELS.oneByOne, action: 'oneByOne' },
      { label: BATCH_LABELS.denyAll, action: 'denyAll', closeAffordance: true },
    ],
    dismissed: 'denyAll',
  };
}

export function buildBatchPrompt(batch: PermissionBatch, now: Date = new Date()): BatchSpec {
  return batchKind(batch) === 'modal' ? buildModal(batch, now) : buildNotification(batch, now);
}

/** What the button a person clicked (by label) does, or closing the prompt for none. */
export function batchActionFor(spec: BatchSpec, label: string | undefined): BatchAction {
  return spec.choices.find((c) => c.label === label)?.action ?? spec.dismissed;
}

/** One call's answer from a single prompt's (one by one): an allowed call that needs naming was named on its
 * prompt's button (a modal's allow buttons say server:tool), so it carries its name. */
export function batchAnswer(request: PermissionRequest, response: PermissionResponse): BatchAnswer {
  const answer: BatchAnswer = { id: request.id, ...response };
  if (response.decision === 'allow' && needsNaming(request)) {
    answer.confirmed = confirmedName(request);
  }
  return answer;
}

/** Allow all: each call once, each destructive (or to-be-confirmed) one with the name its button showed. */
export function allowAllAnswers(batch: PermissionBatch): BatchAnswer[] {
  return batch.requests.map((request) => batchAnswer(request, { decision: 'allow', remember: 'once' }));
}

/** Deny all (and closing the prompt). */
export function denyAllAnswers(batch: PermissionBatch): BatchAnswer[] {
  return batch.requests.map((request) => ({ id: request.id, ...DENY }));
}

/** What a late click on a withdrawn batch names. */
export function batchName(batch: PermissionBatch): string {
  return `the ${batch.requests.length} calls of ${batchAgent(batch, LIMITS.fieldInline)}`;
}
