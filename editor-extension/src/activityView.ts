/**
 * The activity view: a row for each prompt waiting for an answer (from the daemon's status; click to show it), then
 * live records from `mcphost/activity`, newest first, with an icon per outcome, status, duration, intent and time, a
 * filter by intent, and the full record (`mcphost activity show ID`) on click, in a read-only text document.
 */

import { execFile } from 'node:child_process';
import * as vscode from 'vscode';

import type { ActivityRecord, PendingPrompt, PermissionRequest } from './protocol';
import {
  type IntentFilter,
  INTENTS,
  RecordList,
  type RecordView,
  filterLabel,
  formatRecord,
  formatWaiting,
  waitingMatchesFilter,
} from './records';
import { commandArgs, type McphostCommand } from './settings';

export const VIEW_ID = 'mcphost.activity';
export const RECORD_SCHEME = 'mcphost-activity';

export type ActivityItem = { kind: 'record'; record: ActivityRecord } | { kind: 'waiting'; prompt: PendingPrompt };

export class ActivityTree implements vscode.TreeDataProvider<ActivityItem> {
  private readonly records: RecordList;
  private waiting: PendingPrompt[] = [];
  private filter: IntentFilter = 'all';
  private readonly changeEmitter = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changeEmitter.event;

  /** `request` gives what this editor knows of a waiting prompt (the agent, its reason), for the row's tooltip. */
  constructor(
    maxRecords: number,
    private readonly request: (id: string) => PermissionRequest | undefined = () => undefined,
  ) {
    this.records = new RecordList(maxRecords);
  }

  /** The prompts waiting for an answer, as the daemon last reported them (oldest first). */
  setWaiting(prompts: PendingPrompt[]): void {
    const key = (list: PendingPrompt[]) => list.map((p) => p.id).join(' ');
    if (key(prompts) === key(this.waiting)) {
      return;
    }
    this.waiting = [...prompts];
    this.changeEmitter.fire();
  }

  refresh(): void {
    this.changeEmitter.fire();
  }

  add(record: ActivityRecord): void {
    if (this.records.add(record)) {
      this.changeEmitter.fire();
    }
  }

  clear(): void {
    this.records.clear();
    this.changeEmitter.fire();
  }

  setMax(max: number): void {
    this.records.setMax(max);
    this.changeEmitter.fire();
  }

  get currentFilter(): IntentFilter {
    return this.filter;
  }

  setFilter(filter: IntentFilter): void {
    this.filter = filter;
    this.changeEmitter.fire();
  }

  get(id: string): ActivityRecord | undefined {
    return this.records.get(id);
  }

  get count(): number {
    return this.records.list(this.filter).length;
  }

  getChildren(element?: ActivityItem): ActivityItem[] {
    if (element) {
      return [];
    }
    return [
      ...this.waiting.filter((p) => waitingMatchesFilter(p, this.filter)).map((prompt) => ({ kind: 'waiting', prompt }) as const),
      ...this.records.list(this.filter).map((record) => ({ kind: 'record', record }) as const),
    ];
  }

  getTreeItem(element: ActivityItem): vscode.TreeItem {
    if (element.kind === 'waiting') {
      const { prompt } = element;
      const item = treeItem(formatWaiting(prompt, this.request(prompt.id)));
      item.id = `prompt:${prompt.id}`;
      item.contextValue = 'prompt';
      item.command = { command: 'mcphost.showPrompts', title: 'Show Waiting Prompt', arguments: [prompt.id] };
      return item;
    }
    const { record } = element;
    const item = treeItem(formatRecord(record));
    item.id = record.id;
    item.contextValue = `record.${record.type}`;
    item.command = { command: 'mcphost.activity.show', title: 'Show Activity Record', arguments: [record.id] };
    return item;
  }
}

function treeItem(view: RecordView): vscode.TreeItem {
  // Labels, descriptions and string tooltips are plain text in a tree: nothing the agent wrote is rendered.
  const item = new vscode.TreeItem(view.label, vscode.TreeItemCollapsibleState.None);
  item.description = view.description;
  item.tooltip = view.tooltip;
  item.iconPath = new vscode.ThemeIcon(view.icon.id, view.icon.color ? new vscode.ThemeColor(view.icon.color) : undefined);
  item.accessibilityInformation = { label: `${view.label}, ${view.description}` };
  return item;
}

/** Read-only documents with one record each: mcphost-activity:/<id>.txt */
export class RecordDocuments implements vscode.TextDocumentContentProvider {
  constructor(
    private readonly tree: ActivityTree,
    private readonly command: () => McphostCommand | undefined,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  static uri(id: string): vscode.Uri {
    return vscode.Uri.from({ scheme: RECORD_SCHEME, path: `/${id}.txt` });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const id = uri.path.replace(/^\//, '').replace(/\.txt$/, '');
    const command = this.command();
    if (command) {
      try {
        return await runCli(command, ['activity', 'show', id]);
      } catch (error) {
        this.log.warn(`mcphost activity show ${id}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    const record = this.tree.get(id);
    if (record) {
      return `${JSON.stringify(record, null, 2)}\n`;
    }
    return `No activity record ${id}.\n`;
  }
}

/** Runs one mcphost command (same executable, config and environment as the daemon; `cwd` too, where relative paths
 * in that environment must mean the same) and returns its stdout. */
export function runCli(command: McphostCommand, args: string[], timeoutMs = 15_000, cwd?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command.command,
      commandArgs(command, args),
      { env: { ...process.env, ...command.env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, ...(cwd ? { cwd } : {}) },
      (error, stdout, stderr) => {
        if (error) {
          reject(new Error(stderr.trim() || error.message));
        } else {
          resolve(stdout);
        }
      },
    );
  });
}

export async function pickFilter(tree: ActivityTree): Promise<IntentFilter | undefined> {
  const options: IntentFilter[] = ['all', ...INTENTS];
  const picked = await vscode.window.showQuickPick(
    options.map((filter) => ({
      label: filterLabel(filter),
      description: filter === tree.currentFilter ? 'current' : undefined,
      filter,
    })),
    { title: 'mcphost: show activity for', placeHolder: 'Filter the activity view by intent' },
  );
  return picked?.filter;
}
