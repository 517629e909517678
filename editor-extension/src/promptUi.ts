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

import type { PermissionRequest, PermissionResponse } from './protocol';
import { DENY, answerFor, buildPrompt, qualifiedName, typingPause, type PromptSpec } from './prompts';

interface Waiting {
  request: PermissionRequest;
  spec: PromptSpec;
  /** Notifications: which copy is the newest (showing one again makes a new copy). */
  generation: number;
  settle: (response: PermissionResponse) => void;
  /** Modals waiting for a pause in typing: open now. */
  showNow?: () => void;
}

export class PromptPresenter implements vscode.Disposable {
  /** Every prompt this editor holds, oldest first (a Map keeps insertion order). */
  private readonly waiting = new Map<string, Waiting>();
  private modalQueue: Promise<unknown> = Promise.resolve();
  private readonly changeEmitter = new vscode.EventEmitter<number>();
  /** How many prompts this editor holds right now. */
  readonly onDidChangePending = this.changeEmitter.event;
  private lastEditAt: number | undefined;
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

  get pending(): number {
    return this.waiting.size;
  }

  /** The request behind a waiting prompt, for the activity view's row. */
  request(id: string): PermissionRequest | undefined {
    return this.waiting.get(id)?.request;
  }

  async ask(request: PermissionRequest, token: CancellationToken): Promise<PermissionResponse> {
    const spec = buildPrompt(request);
    const name = qualifiedName(request);
    this.log.info(`prompt ${request.id}: ${request.variant} ${name} (${spec.kind})`);
    const answer = spec.kind === 'modal' ? await this.askModal(request, spec, token) : await this.askNotification(request, spec, token);
    if (token.isCancellationRequested) {
      this.log.info(`prompt ${request.id}: withdrawn by the daemon`);
    } else {
      this.log.info(`prompt ${request.id}: ${answer.decision}${answer.decision === 'allow' ? ` (${answer.remember ?? 'once'})` : ''}`);
    }
    return answer;
  }

  /**
   * Shows a waiting prompt again: the one with this id, else the oldest. Returns false when this editor holds none.
   * Every waiting notification comes back (the one asked for first, so that VS Code's limit of toasts at once never
   * drops it); a modal opens now if it was waiting for a pause in typing.
   */
  async show(id?: string): Promise<boolean> {
    const target = id !== undefined ? this.waiting.get(id) : this.waiting.values().next().value;
    if (!target) {
      return false;
    }
    if (target.spec.kind === 'modal') {
      target.showNow?.();
      return true;
    }
    // Hidden first, so that a copy still on screen is not doubled.
    await this.hideToasts();
    this.display(target);
    for (const other of this.waiting.values()) {
      if (other !== target && other.spec.kind === 'notification') {
        this.display(other);
      }
    }
    return true;
  }

  private add(request: PermissionRequest, spec: PromptSpec, settle: (response: PermissionResponse) => void): Waiting {
    const entry: Waiting = { request, spec, generation: 0, settle };
    this.waiting.set(request.id, entry);
    this.changeEmitter.fire(this.pending);
    return entry;
  }

  private remove(id: string): void {
    if (this.waiting.delete(id)) {
      this.changeEmitter.fire(this.pending);
    }
  }

  private askNotification(request: PermissionRequest, spec: PromptSpec, token: CancellationToken): Promise<PermissionResponse> {
    if (token.isCancellationRequested) {
      return Promise.resolve(DENY);
    }
    return new Promise<PermissionResponse>((resolve) => {
      let done = false;
      const entry = this.add(request, spec, (response) => {
        if (done) {
          return;
        }
        done = true;
        cancelListener.dispose();
        this.remove(request.id);
        resolve(response);
      });
      const cancelListener = token.onCancellationRequested(() => {
        if (done) {
          return;
        }
        entry.settle(DENY);
        void this.takeDown();
      });
      this.display(entry);
    });
  }

  private display(entry: Waiting): void {
    entry.generation += 1;
    const generation = entry.generation;
    const labels = entry.spec.choices.map((c) => c.label);
    // Error severity keeps it on screen: see the top of this file.
    void vscode.window.showErrorMessage(entry.spec.message, ...labels).then((label) => {
      if (this.waiting.get(entry.request.id) !== entry) {
        if (label !== undefined) {
          void vscode.window.showInformationMessage(
            `mcphost: ${qualifiedName(entry.request)} is no longer waiting (it expired or was answered elsewhere); your answer was not used.`,
          );
        }
        return;
      }
      if (label === undefined && generation !== entry.generation) {
        return; // an older copy went away; the newer one still asks
      }
      // Closing the notification without a choice denies, as the prompt says.
      entry.settle(answerFor(entry.spec, label));
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
    for (const entry of this.waiting.values()) {
      if (entry.spec.kind === 'notification') {
        this.display(entry);
      }
    }
  }

  /** Resolves once nobody has typed for a moment, when the prompt is withdrawn, or when asked to show it now. */
  private untilTypingPauses(entry: Waiting, token: CancellationToken): Promise<void> {
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

  private askModal(request: PermissionRequest, spec: PromptSpec, token: CancellationToken): Promise<PermissionResponse> {
    const entry = this.add(request, spec, () => undefined);
    const turn = this.modalQueue.then(async () => {
      if (token.isCancellationRequested) {
        return DENY; // withdrawn before its turn: never shown
      }
      await this.untilTypingPauses(entry, token);
      if (token.isCancellationRequested) {
        return DENY;
      }
      const items: vscode.MessageItem[] = spec.choices.map((c) => ({ title: c.label, isCloseAffordance: c.closeAffordance }));
      const picked = await vscode.window.showWarningMessage(spec.message, { modal: true, detail: spec.detail }, ...items);
      if (token.isCancellationRequested) {
        if (picked !== undefined) {
          void vscode.window.showInformationMessage(
            `mcphost: ${qualifiedName(request)} is no longer waiting (it expired or was answered elsewhere); your answer was not used.`,
          );
        }
        return DENY;
      }
      return answerFor(spec, picked?.title);
    });
    this.modalQueue = turn.catch(() => undefined);
    return turn.finally(() => this.remove(request.id));
  }

  dispose(): void {
    for (const entry of [...this.waiting.values()]) {
      entry.settle(DENY);
    }
    for (const d of this.disposables.splice(0)) {
      d.dispose();
    }
  }
}
