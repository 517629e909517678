/**
 * One prompt per call, the VS Code side (the wording and the decisions are in singlePrompt.ts): offers once, when VS
 * Code lists mcphost's tools, to let mcphost be the only one to ask before they run; with the person's consent opens
 * VS Code's own tool approval list, where they tick "Run any tool without approval" under mcphost; remembers the
 * answer in `mcphost.singlePrompt`. The command "mcphost: One Prompt per Call..." asks the same question at any time.
 *
 * The offer is a modal dialog: a notification with buttons hides after about ten seconds, and a question that goes
 * away unanswered is not consent. Like a destructive prompt it waits for a pause in typing, so that a keystroke meant
 * for an editor never answers it.
 */

import * as vscode from 'vscode';

import { typingPause } from './prompts';
import {
  BUTTONS,
  type ListedTool,
  MANAGE_TOOL_APPROVAL_COMMAND,
  MANAGE_TOOL_APPROVAL_SCOPE,
  NO_APPROVAL_LIST,
  type SinglePromptAnswer,
  answerFor,
  effectOf,
  mcphostToolsIn,
  offerText,
  shouldOffer,
} from './singlePrompt';
import { readSettings, updateSetting } from './workspaceSettings';

const POLL_MS = 1_000;

/** The tools VS Code lists to extensions (MCP servers' tools included, once it has started them or cached them). */
function listedTools(): ListedTool[] {
  const tools: readonly vscode.LanguageModelToolInformation[] = vscode.lm?.tools ?? [];
  return tools.map((tool) => ({
    name: tool.name,
    tags: tool.tags,
    // Not in the 1.101 API types, there at run time in 1.139.
    fullReferenceName: (tool as { fullReferenceName?: unknown }).fullReferenceName as string | undefined,
  }));
}

async function approvalListAvailable(): Promise<boolean> {
  return (await vscode.commands.getCommands(true)).includes(MANAGE_TOOL_APPROVAL_COMMAND);
}

export class SinglePromptOffer implements vscode.Disposable {
  /** Offered in this window already: "Not now" waits for the next one. */
  private offered = false;
  private asking = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private watchUntil = 0;
  private lastEditAt: number | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.disposables.push(
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (event.contentChanges.length > 0 && event.document.uri.scheme !== 'output') {
          this.lastEditAt = Date.now();
        }
      }),
    );
  }

  /** The setting went back to "offer": offer again in this window. */
  reset(): void {
    this.offered = false;
  }

  /** Looks for mcphost's tools among VS Code's for a while, and offers once they are there. */
  watch(forMs: number): void {
    this.watchUntil = Math.max(this.watchUntil, Date.now() + forMs);
    if (this.timer === undefined) {
      this.schedule(0);
    }
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      void this.check().then((done) => {
        this.timer = undefined;
        if (!done && Date.now() < this.watchUntil) {
          this.schedule(POLL_MS);
        }
      });
    }, delayMs);
  }

  /** True when there is nothing more to wait for. */
  private async check(): Promise<boolean> {
    const settings = readSettings();
    if (settings.singlePrompt !== 'offer' || !settings.registerMcpServer || this.offered) {
      return true;
    }
    const tools = mcphostToolsIn(listedTools());
    if (tools.length === 0) {
      return false;
    }
    const state = {
      choice: settings.singlePrompt,
      registerMcpServer: settings.registerMcpServer,
      offeredThisSession: this.offered,
      toolsKnown: true,
      approvalListAvailable: await approvalListAvailable(),
    };
    if (!shouldOffer(state)) {
      if (!state.approvalListAvailable) {
        this.log.info('one prompt per call: this VS Code has no "Chat: Manage Tool Approval"; not offered');
      }
      return true;
    }
    this.offered = true;
    this.log.info(`one prompt per call: VS Code lists mcphost's tools (${tools.join(', ')}); offering it`);
    await this.waitForTypingPause();
    await this.ask();
    return true;
  }

  private async waitForTypingPause(): Promise<void> {
    for (let wait = typingPause(this.lastEditAt, Date.now()); wait > 0; wait = typingPause(this.lastEditAt, Date.now())) {
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  /** Asks who should ask (the command, or the offer), and does what the answer says. */
  async ask(): Promise<void> {
    if (this.asking) {
      return;
    }
    this.asking = true;
    try {
      const current = readSettings().singlePrompt;
      const text = offerText(current);
      const items: vscode.MessageItem[] = [
        { title: BUTTONS.mcphost },
        { title: BUTTONS.both },
        { title: BUTTONS.later, isCloseAffordance: true },
      ];
      const picked = await vscode.window.showInformationMessage(text.message, { modal: true, detail: text.detail }, ...items);
      const answer = answerFor(picked?.title);
      this.log.info(`one prompt per call: "${BUTTONS[answer]}"`);
      await this.apply(answer, current);
    } finally {
      this.asking = false;
    }
  }

  private async apply(answer: SinglePromptAnswer, current: ReturnType<typeof readSettings>['singlePrompt']): Promise<void> {
    const effect = effectOf(answer, current);
    if (effect.openApprovalList) {
      if (!(await approvalListAvailable())) {
        await vscode.window.showInformationMessage(NO_APPROVAL_LIST, { modal: true });
      } else if (mcphostToolsIn(listedTools()).length === 0) {
        // VS Code's list holds only the tools it knows: mcphost's appear once it has started the server.
        await vscode.window.showInformationMessage(
          'mcphost: VS Code does not list mcphost\'s tools yet, so its tool approval list has no mcphost entry. Start the ' +
            'server ("MCP: List Servers", mcphost, Start Server) or use agent mode once, then run "mcphost: One Prompt per ' +
            'Call..." again.',
          { modal: true },
        );
        return;
      }
    }
    if (effect.choice) {
      const where = await updateSetting('singlePrompt', effect.choice);
      this.log.info(`one prompt per call: mcphost.singlePrompt = "${effect.choice}" (${where} settings)`);
    }
    if (effect.openApprovalList && (await approvalListAvailable())) {
      if (effect.instruction) {
        void vscode.window.showInformationMessage(effect.instruction);
      }
      await vscode.commands.executeCommand(MANAGE_TOOL_APPROVAL_COMMAND, MANAGE_TOOL_APPROVAL_SCOPE);
    }
  }

  dispose(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.watchUntil = 0;
    for (const disposable of this.disposables) {
      disposable.dispose();
    }
  }
}
