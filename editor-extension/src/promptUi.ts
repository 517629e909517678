/**
 * Shows permission prompts (built by src/prompts.ts) and returns the person's answer.
 *
 * - ask: a notification with Allow once / Allow for this session / Always allow (when offered) / Deny.
 * - confirm, and every destructive call: a modal warning whose close button (Escape, the X) is Deny.
 *
 * A write prompt is an error-severity notification, and that is deliberate. A call waits for the answer (five
 * minutes by default) while its agent looks hung, so the question must stay in sight until it is answered, expires
 * or is withdrawn. VS Code hides every notification with buttons after 10 to 15 seconds unless it is an error
 * (a notification is sticky when `hasActions && severity === Error`; an extension cannot ask for sticky), and Do Not
 * Disturb silences every other severity. The other ways to keep a question on screen cost the person more: a modal
 * blocks the whole window for a routine write, a QuickPick or an input box takes the keystrokes they were typing
 * (and Enter would allow the call), a progress notification stays but cannot carry the answer buttons, and a
 * webview takes an editor's place. The error icon is the price; the text says plainly that an agent asks.
 *
 * A destructive modal takes the keyboard focus, like every dialog, and VS Code focuses its first button, which is
 * an Allow button once Deny is the close button (a close button is always placed last). So a modal waits for a pause
 * in typing (no edit for TYPING_QUIET_MS) before it opens: Enter or a space meant for an editor never lands on it.
 * Clicking the status bar entry or the waiting row opens it at once, as the person asked.
 *
 * "Allow for this session" and "Always allow" are followed, when the daemon offers to narrow them, by the scope
 * question (src/scopeUi.ts): any arguments, exactly these, or a pattern. Escape there is no answer: the prompt comes
 * back, and it stays waiting (counted, listed) all along.
 *
 * A batch (`mcphost/permissionBatch`: calls from one agent session that asked within a short window, src/batch.ts) is
 * one prompt for all its calls: a notification like a write prompt, or a modal like a destructive one when any call
 * is destructive or to be confirmed. "One by one" then shows each of its calls with the ordinary prompt in turn
 * (within the batch modal's turn, when it was a modal); the batch answers once all were asked. A batch counts as its
 * calls in this editor's pending count, and the activity view's row of any of them shows it.
 *
 * When the daemon withdraws a prompt ($/cancelRequest: it expired, was answered elsewhere, or its call ended), the
 * prompt goes away. VS Code has no API to close one message (microsoft/vscode#134777), so a withdrawn notification
 * is taken off the screen by hiding the notification toasts (`notifications.hideToasts`; other extensions'
 * notifications stay in the notification center) and the prompts still waiting are shown again; a button pressed
 * later on a withdrawn prompt does nothing but say so. Modal prompts are shown one at a time, and one withdrawn
 * before its turn is never shown; one already on screen stays until it is answered (a modal dialog cannot be
 * closed by an extension), and its answer is then dropped with a note.
 */

import * as vscode from 'vscode';
import type { CancellationToken } from 'vscode-languageclient/node';

import {
  allowAllAnswers,
  batchActionFor,
  batchAnswer,
  batchName,
  buildBatchPrompt,
  denyAllAnswers,
} from './batch';
import type { BatchAnswer, PermissionBatch, PermissionBatchResult, PermissionRequest, PermissionResponse } from './protocol';
import {
  type BatchPosition,
  DENY,
  type PromptKind,
  answerFor,
  buildPrompt,
  qualifiedName,
  secondsLeft,
  typingPause,
} from './prompts';
import { needsScope } from './scope';
import { askScope } from './scopeUi';

/** The daemon withdrew the prompt. */
const WITHDRAWN = Symbol('withdrawn');
type Picked = string | undefined | typeof WITHDRAWN;

/** A prompt on screen (or waiting for its turn): one call's, or a batch's. */
interface Entry {
  key: string;
  kind: PromptKind;
  message: string;
  detail?: string;
  buttons: { label: string; closeAffordance?: boolean }[];
  /** The calls it stands for that wait on this editor: one, or a batch's (one by one: those not asked yet). */
  requests: PermissionRequest[];
  /** What a late click names. */
  name: string;
  /** Notifications: which copy is the newest (showing one again makes a new copy). */
  generation: number;
  /** Set while a copy on screen waits for a click; unset while the scope question is open, or one by one runs. */
  pick?: (label: string | undefined) => void;
  /** Modals waiting for a pause in typing: open now. */
  showNow?: () => void;
  /** A batch answered one by one: the key of the prompt on screen for it now. */
  current?: string;
}

export class PromptPresenter implements vscode.Disposable {
  /** Every prompt this editor holds, oldest first (a Map keeps insertion order). */
  private readonly entries = new Map<string, Entry>();
  private modalQueue: Promise<unknown> = Promise.resolve();
  private readonly changeEmitter = new vscode.EventEmitter<number>();
  /** How many calls wait on this editor's prompts right now. */
  readonly onDidChangePending = this.changeEmitter.event;
  private lastEditAt: number | undefined;
  private disposed = false;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.disposables.push(
      this.changeEmitter,
      vscode.workspace.onDidChangeTextDocument((event) => {
        // Output channels change on their own; a person's typing changes the documents they edit.
        if (event.contentChanges.length > 0 && event.document.uri.scheme !== 'output') {
          this.lastEditAt = Date.now();
        }
      }),
    );
  }

  /** Calls waiting on this editor's prompts (a batch counts its calls). */
  get pending(): number {
    let count = 0;
    for (const entry of this.entries.values()) {
      count += entry.requests.length;
    }
    return count;
  }

  /** The request behind a waiting call, alone or in a batch, for the activity view's row. */
  request(id: string): PermissionRequest | undefined {
    for (const entry of this.entries.values()) {
      const found = entry.requests.find((r) => r.id === id);
      if (found) {
        return found;
      }
    }
    return undefined;
  }

  /** The prompt that stands for a call (its own, or its batch's, or the one by one prompt on screen for the batch). */
  private entryFor(id: string | undefined): Entry | undefined {
    let entry: Entry | undefined;
    if (id === undefined) {
      entry = this.entries.values().next().value;
    } else {
      entry = this.entries.get(id) ?? [...this.entries.values()].find((e) => e.requests.some((r) => r.id === id));
    }
    if (entry?.current !== undefined) {
      return this.entries.get(entry.current) ?? entry;
    }
    return entry;
  }

  /** One call's prompt; `position` and `ownTurn` when it is a batch's, asked one by one. */
  async ask(request: PermissionRequest, token: CancellationToken, position?: BatchPosition, ownTurn = false): Promise<PermissionResponse> {
    const spec = buildPrompt(request, new Date(), position);
    const name = qualifiedName(request);
    this.log.info(`prompt ${request.id}: ${request.variant} ${name} (${spec.kind})`);
    const entry = this.add({
      key: request.id,
      kind: spec.kind,
      message: spec.message,
      detail: spec.detail,
      buttons: spec.choices.map((c) => ({ label: c.label, closeAffordance: c.closeAffordance })),
      requests: [request],
      name,
      generation: 0,
    });
    const run = async (): Promise<PermissionResponse> => {
      for (;;) {
        const picked = await this.present(entry, token);
        if (picked === WITHDRAWN) {
          return DENY;
        }
        const response = answerFor(spec, picked);
        if (!needsScope(request, response)) {
          return response;
        }
        // What the remembered allow covers; Escape there is no answer: the prompt comes back.
        const scoped = await askScope(request, response.remember, token);
        if (token.isCancellationRequested) {
          return DENY;
        }
        if (scoped) {
          return scoped;
        }
        this.log.info(`prompt ${request.id}: the scope question was closed; asking again`);
      }
    };
    try {
      const answer = spec.kind === 'modal' && !ownTurn ? await this.inModalTurn(run) : await run();
      if (token.isCancellationRequested) {
        this.log.info(`prompt ${request.id}: withdrawn by the daemon`);
      } else {
        this.log.info(`prompt ${request.id}: ${describe(answer)}`);
      }
      return answer;
    } finally {
      this.remove(entry);
    }
  }

  /** A batch's prompt: allow all, deny all, or one by one. */
  async askBatch(batch: PermissionBatch, token: CancellationToken): Promise<PermissionBatchResult> {
    const spec = buildBatchPrompt(batch);
    const ids = batch.requests.map((r) => r.id).join(', ');
    this.log.info(`batch ${batch.id}: ${batch.requests.length} calls (${ids}) (${spec.kind})`);
    const entry = this.add({
      key: `batch:${batch.id}`,
      kind: spec.kind,
      message: spec.message,
      detail: spec.detail,
      buttons: spec.choices.map((c) => ({ label: c.label, closeAffordance: c.closeAffordance })),
      requests: [...batch.requests],
      name: batchName(batch),
      generation: 0,
    });
    const run = async (): Promise<BatchAnswer[] | undefined> => {
      const picked = await this.present(entry, token);
      if (picked === WITHDRAWN) {
        return undefined;
      }
      const action = batchActionFor(spec, picked);
      this.log.info(`batch ${batch.id}: ${action}`);
      if (action === 'allowAll') {
        return allowAllAnswers(batch);
      }
      if (action === 'denyAll') {
        return denyAllAnswers(batch);
      }
      return this.oneByOne(entry, batch, token, spec.kind === 'modal');
    };
    try {
      const answers = spec.kind === 'modal' ? await this.inModalTurn(run) : await run();
      if (answers === undefined || token.isCancellationRequested) {
        this.log.info(`batch ${batch.id}: withdrawn by the daemon`);
        return { answers: [] };
      }
      this.log.info(`batch ${batch.id}: ${answers.map((a) => `${a.id} ${describe(a)}`).join('; ')}`);
      return { answers };
    } finally {
      this.remove(entry);
    }
  }

  /** Each call of a batch with its own prompt, in turn; a call past its expiry is skipped (left unanswered). */
  private async oneByOne(entry: Entry, batch: PermissionBatch, token: CancellationToken, ownTurn: boolean): Promise<BatchAnswer[]> {
    const answers: BatchAnswer[] = [];
    const count = batch.requests.length;
    try {
      for (const [index, request] of batch.requests.entries()) {
        // Counted once: as the prompt on screen, then no longer in the batch's own list.
        entry.requests = batch.requests.slice(index + 1);
        if (token.isCancellationRequested || this.disposed) {
          break;
        }
        if (secondsLeft(request.expires_at, new Date()) === 0) {
          this.log.info(`batch ${batch.id}: ${request.id} expired before its turn`);
          this.changeEmitter.fire(this.pending);
          continue;
        }
        entry.current = request.id;
        const response = await this.ask(request, token, { index, count }, ownTurn);
        if (token.isCancellationRequested) {
          break;
        }
        answers.push(batchAnswer(request, response));
      }
    } finally {
      entry.current = undefined;
    }
    return answers;
  }

  /**
   * Shows a waiting prompt again: the one for this call (alone or in a batch), else the oldest. Returns false when
   * this editor holds none. Every waiting notification comes back (the one asked for first, so that VS Code's limit
   * of toasts at once never drops it); a modal opens now if it was waiting for a pause in typing.
   */
  async show(id?: string): Promise<boolean> {
    const target = this.entryFor(id);
    if (!target) {
      return false;
    }
    if (target.kind === 'modal') {
      target.showNow?.();
      return true;
    }
    // Hidden first, so that a copy still on screen is not doubled.
    await this.hideToasts();
    if (target.pick) {
      this.display(target);
    }
    for (const other of this.entries.values()) {
      if (other !== target && other.kind === 'notification' && other.pick) {
        this.display(other);
      }
    }
    return true;
  }

  private add(entry: Entry): Entry {
    this.entries.set(entry.key, entry);
    this.changeEmitter.fire(this.pending);
    return entry;
  }

  private remove(entry: Entry): void {
    if (this.entries.get(entry.key) === entry) {
      this.entries.delete(entry.key);
      entry.pick = undefined;
      this.changeEmitter.fire(this.pending);
    }
  }

  /** Runs `fn` when no other modal prompt is open or waiting before it: modals are shown one at a time. */
  private inModalTurn<T>(fn: () => Promise<T>): Promise<T> {
    const turn = this.modalQueue.then(fn);
    this.modalQueue = turn.catch(() => undefined);
    return turn;
  }

  /** Shows the prompt (again) and waits for the person's choice: a button's label, undefined (closed), WITHDRAWN. */
  private present(entry: Entry, token: CancellationToken): Promise<Picked> {
    return entry.kind === 'modal' ? this.presentModal(entry, token) : this.presentNotification(entry, token);
  }

  private presentNotification(entry: Entry, token: CancellationToken): Promise<Picked> {
    if (token.isCancellationRequested || this.disposed) {
      return Promise.resolve(WITHDRAWN);
    }
    return new Promise<Picked>((resolve) => {
      const finish = (picked: Picked) => {
        if (entry.pick !== pick) {
          return;
        }
        entry.pick = undefined;
        cancelListener.dispose();
        resolve(picked);
      };
      const pick = (label: string | undefined) => finish(this.disposed ? WITHDRAWN : label);
      const cancelListener = token.onCancellationRequested(() => {
        if (entry.pick === pick) {
          finish(WITHDRAWN);
          void this.takeDown();
        }
      });
      entry.pick = pick;
      this.display(entry);
    });
  }

  private display(entry: Entry): void {
    entry.generation += 1;
    const generation = entry.generation;
    const labels = entry.buttons.map((b) => b.label);
    // Error severity keeps it on screen: see the top of this file.
    void vscode.window.showErrorMessage(entry.message, ...labels).then((label) => {
      if (this.entries.get(entry.key) !== entry) {
        if (label !== undefined) {
          void vscode.window.showInformationMessage(
            `mcphost: ${entry.name} ${entry.requests.length > 1 ? 'are' : 'is'} no longer waiting (expired or answered elsewhere); your answer was not used.`,
          );
        }
        return;
      }
      if (!entry.pick) {
        return; // answered through another copy already (its scope question may be open)
      }
      if (label === undefined && generation !== entry.generation) {
        return; // an older copy went away; the newer one still asks
      }
      // Closing the notification without a choice denies, as the prompt says.
      entry.pick(label);
    });
  }

  private async hideToasts(): Promise<void> {
    try {
      await vscode.commands.executeCommand('notifications.hideToasts');
    } catch (error) {
      this.log.debug(`notifications.hideToasts: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Takes withdrawn notifications off the screen, and puts the ones still waiting back. */
  private async takeDown(): Promise<void> {
    await this.hideToasts();
    for (const entry of this.entries.values()) {
      if (entry.kind === 'notification' && entry.pick) {
        this.display(entry);
      }
    }
  }

  /** Resolves once nobody has typed for a moment, when the prompt is withdrawn, or when asked to show it now. */
  private untilTypingPauses(entry: Entry, token: CancellationToken): Promise<void> {
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      let now = false;
      const finish = () => {
        clearTimeout(timer);
        cancelListener.dispose();
        entry.showNow = undefined;
        resolve();
      };
      const check = () => {
        const wait = typingPause(this.lastEditAt, Date.now());
        if (now || wait <= 0 || token.isCancellationRequested) {
          finish();
        } else {
          timer = setTimeout(check, wait);
        }
      };
      const cancelListener = token.onCancellationRequested(() => finish());
      entry.showNow = () => {
        now = true;
        clearTimeout(timer);
        check();
      };
      check();
    });
  }

  private async presentModal(entry: Entry, token: CancellationToken): Promise<Picked> {
    if (token.isCancellationRequested || this.disposed) {
      return WITHDRAWN; // withdrawn before its turn: never shown
    }
    await this.untilTypingPauses(entry, token);
    if (token.isCancellationRequested || this.disposed) {
      return WITHDRAWN;
    }
    const items: vscode.MessageItem[] = entry.buttons.map((b) => ({ title: b.label, isCloseAffordance: b.closeAffordance }));
    const picked = await vscode.window.showWarningMessage(entry.message, { modal: true, detail: entry.detail }, ...items);
    if (token.isCancellationRequested) {
      if (picked !== undefined) {
        void vscode.window.showInformationMessage(
          `mcphost: ${entry.name} ${entry.requests.length > 1 ? 'are' : 'is'} no longer waiting (expired or answered elsewhere); your answer was not used.`,
        );
      }
      return WITHDRAWN;
    }
    return picked?.title;
  }

  dispose(): void {
    this.disposed = true;
    for (const entry of [...this.entries.values()]) {
      entry.pick?.(undefined);
    }
    for (const d of this.disposables.splice(0)) {
      d.dispose();
    }
  }
}

function describe(answer: PermissionResponse): string {
  if (answer.decision !== 'allow') {
    return answer.decision;
  }
  const match = answer.match && answer.match !== 'tool' ? `, ${answer.match}` : '';
  return `allow (${answer.remember ?? 'once'}${match})`;
}
