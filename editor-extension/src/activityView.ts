/**
 * The activity view: live records from `mcphost/activity`, newest first, with the intent icon, status and time, a
 * filter by intent, and the full record (`mcphost activity show ID`) on click, in a read-only text document.
 */

import { execFile } from 'node:child_process';
import * as vscode from 'vscode';

import type { ActivityRecord } from './protocol';
import { type IntentFilter, INTENTS, RecordList, filterLabel, formatRecord } from './records';
import { commandArgs, type McphostCommand } from './settings';

export const VIEW_ID = 'mcphost.activity';
export const RECORD_SCHEME = 'mcphost-activity';

export class ActivityTree implements vscode.TreeDataProvider<ActivityRecord> {
  private readonly records: RecordList;
  private filter: IntentFilter = 'all';
  private readonly changeEmitter = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changeEmitter.event;

  constructor(maxRecords: number) {
    this.records = new RecordList(maxRecords);
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

  getChildren(element?: ActivityRecord): ActivityRecord[] {
    return element ? [] : this.records.list(this.filter);
  }

  getTreeItem(record: ActivityRecord): vscode.TreeItem {
    const view = formatRecord(record);
    // Labels, descriptions and string tooltips are plain text in a tree: nothing the agent wrote is rendered.
    const item = new vscode.TreeItem(view.label, vscode.TreeItemCollapsibleState.None);
    item.id = record.id;
    item.description = view.description;
    item.tooltip = view.tooltip;
    item.iconPath = new vscode.ThemeIcon(
      view.icon.id,
      view.icon.color ? new vscode.ThemeColor(view.icon.color) : undefined,
    );
    item.contextValue = `record.${record.type}`;
    item.accessibilityInformation = { label: `${view.label}, ${view.description}` };
    item.command = { command: 'mcphost.activity.show', title: 'Show Activity Record', arguments: [record.id] };
    return item;
  }
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

/** Runs one mcphost command (same executable, config and environment as the daemon) and returns its stdout. */
export function runCli(command: McphostCommand, args: string[], timeoutMs = 15_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command.command,
      commandArgs(command, args),
      { env: { ...process.env, ...command.env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
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
