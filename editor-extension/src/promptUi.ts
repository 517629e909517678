/**
 * Shows permission prompts (built by src/prompts.ts) and returns the person's answer.
 *
 * - ask: a notification with Allow once / Allow for this session / Always allow (when offered) / Deny.
 * - confirm, and every destructive call: a modal warning whose default button is Deny.
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
import { DENY, answerFor, buildPrompt, qualifiedName, type PromptSpec } from './prompts';

interface LiveNotification {
  request: PermissionRequest;
  spec: PromptSpec;
  generation: number;
  settle: (response: PermissionResponse) => void;
}

export class PromptPresenter implements vscode.Disposable {
  private readonly notifications = new Map<string, LiveNotification>();
  private modalQueue: Promise<unknown> = Promise.resolve();
  private readonly changeEmitter = new vscode.EventEmitter<number>();
  /** How many prompts this editor shows right now. */
  readonly onDidChangePending = this.changeEmitter.event;
  private modalsWaiting = 0;

  constructor(private readonly log: vscode.LogOutputChannel) {}

  get pending(): number {
    return this.notifications.size + this.modalsWaiting;
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

  /** Shows every waiting notification prompt again (they may have gone to the notification center). */
  showPending(): void {
    for (const live of this.notifications.values()) {
      this.display(live);
    }
  }

  private askNotification(request: PermissionRequest, spec: PromptSpec, token: CancellationToken): Promise<PermissionResponse> {
    return new Promise<PermissionResponse>((resolve) => {
      let done = false;
      const live: LiveNotification = {
        request,
        spec,
        generation: 0,
        settle: (response) => {
          if (done) {
            return;
          }
          done = true;
          cancelListener.dispose();
          this.notifications.delete(request.id);
          this.changeEmitter.fire(this.pending);
          resolve(response);
        },
      };
      const cancelListener = token.onCancellationRequested(() => {
        if (done) {
          return;
        }
        live.settle(DENY);
        void this.takeDown();
      });
      if (token.isCancellationRequested) {
        live.settle(DENY);
        return;
      }
      this.notifications.set(request.id, live);
      this.changeEmitter.fire(this.pending);
      this.display(live);
    });
  }

  private display(live: LiveNotification): void {
    live.generation += 1;
    const generation = live.generation;
    const labels = live.spec.choices.map((c) => c.label);
    const show = live.spec.severity === 'warning' ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    void show(live.spec.message, ...labels).then((label) => {
      if (!this.notifications.has(live.request.id)) {
        if (label !== undefined) {
          void vscode.window.showInformationMessage(
            `mcphost: ${qualifiedName(live.request)} is no longer waiting (it expired or was answered elsewhere); your answer was not used.`,
          );
        }
        return;
      }
      if (generation !== live.generation) {
        return; // replaced by a newer copy of the same prompt
      }
      // Closing the notification without a choice denies, as the prompt says.
      live.settle(answerFor(live.spec, label));
    });
  }

  /** Takes withdrawn notifications off the screen, and puts the ones still waiting back. */
  private async takeDown(): Promise<void> {
    try {
      await vscode.commands.executeCommand('notifications.hideToasts');
    } catch (error) {
      this.log.debug(`notifications.hideToasts: ${error instanceof Error ? error.message : String(error)}`);
    }
    this.showPending();
  }

  private askModal(request: PermissionRequest, spec: PromptSpec, token: CancellationToken): Promise<PermissionResponse> {
    this.modalsWaiting += 1;
    this.changeEmitter.fire(this.pending);
    const turn = this.modalQueue.then(async () => {
      if (token.isCancellationRequested) {
        return DENY; // withdrawn before its turn: never shown
      }
      const items: vscode.MessageItem[] = spec.choices.map((c) => ({ title: c.label }));
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
    return turn.finally(() => {
      this.modalsWaiting -= 1;
      this.changeEmitter.fire(this.pending);
    });
  }

  dispose(): void {
    for (const live of [...this.notifications.values()]) {
      live.settle(DENY);
    }
    this.changeEmitter.dispose();
  }
}
