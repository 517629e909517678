/**
 * The extension's entry point: wires the daemon, the prompts, the activity view, the MCP server definition and the
 * commands together. Everything with logic of its own lives in the pure modules (prompts, records, settings,
 * statusText, grantsText) or in the class that owns it (Daemon, StatusItems, PromptPresenter, ActivityTree); settings
 * are read only through workspaceSettings.
 */

import * as vscode from 'vscode';

import { ActivityTree, RECORD_SCHEME, RecordDocuments, VIEW_ID, pickFilter, runCli } from './activityView';
import { Daemon } from './daemon';
import { grantItemText } from './grantsText';
import { McphostMcpProvider, PROVIDER_ID } from './mcpProvider';
import { PromptPresenter } from './promptUi';
import type { GrantInfo } from './protocol';
import { formatTime } from './records';
import { SinglePromptOffer } from './singlePromptUi';
import { DAEMON_SETTINGS, commandArgs, shellLine } from './settings';
import { readSettings, settingsChanged } from './workspaceSettings';

const TERMINAL_NAME = 'mcphost log';

export interface McphostApi {
  /** For tests and other extensions: the daemon's state and its agent endpoint, as last reported. */
  readonly daemon: Daemon;
}

let active: Daemon | undefined;

export function activate(context: vscode.ExtensionContext): McphostApi {
  const daemon = new Daemon();
  active = daemon;
  const presenter = new PromptPresenter(daemon.log);
  daemon.onPermissionRequest = (request, token) => presenter.ask(request, token);
  daemon.onPermissionBatch = (batch, token) => presenter.askBatch(batch, token);
  context.subscriptions.push(daemon, presenter);

  // ---- activity view
  const tree = new ActivityTree(readSettings().activityMaxRecords, (id) => presenter.request(id));
  const view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: tree, showCollapseAll: false });
  const updateViewTitle = () => {
    const filter = tree.currentFilter;
    view.description = filter === 'all' ? undefined : `${filter} only`;
    const pending = daemon.status?.pending ?? 0;
    view.badge = pending > 0 ? { value: pending, tooltip: `${pending} mcphost prompt(s) pending` } : undefined;
  };
  context.subscriptions.push(
    view,
    daemon.onActivity((record) => tree.add(record)),
    // The daemon's status may list a prompt before its request reaches this editor: its row's tooltip catches up.
    presenter.onDidChangePending(() => tree.refresh()),
    daemon.onDidChangeStatus((status) => {
      tree.setWaiting(Array.isArray(status?.prompts) ? status.prompts : []);
      updateViewTitle();
    }),
    vscode.workspace.registerTextDocumentContentProvider(
      RECORD_SCHEME,
      new RecordDocuments(tree, () => daemon.command, daemon.log),
    ),
  );

  // ---- agent mode: the daemon's endpoint as an MCP server definition, and one prompt per call for its tools
  const singlePrompt = new SinglePromptOffer(daemon.log);
  context.subscriptions.push(singlePrompt);
  if (typeof vscode.lm?.registerMcpServerDefinitionProvider === 'function') {
    const provider = new McphostMcpProvider(daemon, () => readSettings().registerMcpServer);
    context.subscriptions.push(provider, vscode.lm.registerMcpServerDefinitionProvider(PROVIDER_ID, provider));
    context.subscriptions.push(
      // VS Code lists a server's tools once it has started it (or from its cache, at startup): offer then.
      provider.onDidResolve(() => singlePrompt.watch(60_000)),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (settingsChanged(event, ['registerMcpServer'])) {
          provider.refresh();
        }
        if (settingsChanged(event, ['singlePrompt', 'registerMcpServer'])) {
          if (readSettings().singlePrompt === 'offer') {
            singlePrompt.reset();
          }
          singlePrompt.watch(30_000);
        }
      }),
    );
    singlePrompt.watch(30_000);
  } else {
    daemon.log.warn('this VS Code has no MCP server definition API: add the daemon to mcp.json by hand');
  }

  // ---- commands
  const register = (id: string, run: (...args: never[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, run));

  register('mcphost.restart', () => daemon.restart());
  register('mcphost.showDaemonLog', () => daemon.log.show(true));
  register('mcphost.showActivity', async () => {
    await presenter.show();
    await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
  });
  register('mcphost.showPrompts', async (id?: string) => {
    if (!(await presenter.show(typeof id === 'string' ? id : undefined))) {
      // Shown somewhere else (another editor, `mcphost approve`), or answered meanwhile: the view says which.
      await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
    }
  });
  register('mcphost.activity.show', async (id: string) => {
    const doc = await vscode.workspace.openTextDocument(RecordDocuments.uri(id));
    await vscode.window.showTextDocument(doc, { preview: true });
  });
  register('mcphost.activity.filter', async () => {
    const filter = await pickFilter(tree);
    if (filter) {
      tree.setFilter(filter);
      updateViewTitle();
    }
  });
  register('mcphost.activity.clear', () => tree.clear());
  register('mcphost.openConfig', async () => {
    const file = daemon.status?.config_path ?? (await cliOutput(['config', 'path']));
    if (file) {
      await openFile(file, 'the config');
    }
  });
  register('mcphost.openActivityLog', async () => {
    const file = daemon.status?.log_path;
    if (!file) {
      void vscode.window.showWarningMessage('mcphost: the daemon is not running, so the activity log is not known.');
      return;
    }
    await openFile(file, 'the activity log');
  });
  register('mcphost.tailLog', async () => {
    const resolved = await daemon.resolveVerified();
    if (!resolved.ok) {
      void vscode.window.showErrorMessage(`mcphost: ${resolved.error}`);
      return;
    }
    const command = resolved.command;
    const existing = vscode.window.terminals.find((t) => t.name === TERMINAL_NAME);
    existing?.dispose();
    const terminal = vscode.window.createTerminal({ name: TERMINAL_NAME, env: command.env });
    terminal.show();
    terminal.sendText(shellLine([command.command, ...commandArgs(command, ['log', 'tail', '-f'])], process.platform));
  });
  register('mcphost.grants', () => manageGrants(daemon));
  register('mcphost.revokeAllGrants', () => revokeAll(daemon));
  register('mcphost.singlePrompt', () => singlePrompt.ask());

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (settingsChanged(event, ['activityMaxRecords'])) {
        tree.setMax(readSettings().activityMaxRecords);
      }
      if (settingsChanged(event, DAEMON_SETTINGS)) {
        const choice = await vscode.window.showInformationMessage(
          'mcphost: the daemon settings changed.',
          'Restart Daemon',
        );
        if (choice === 'Restart Daemon') {
          await daemon.restart();
        }
      }
    }),
  );

  async function cliOutput(args: string[]): Promise<string | undefined> {
    const resolved = await daemon.resolveVerified();
    if (!resolved.ok) {
      void vscode.window.showErrorMessage(`mcphost: ${resolved.error}`);
      return undefined;
    }
    try {
      return (await runCli(resolved.command, args)).trim();
    } catch (error) {
      void vscode.window.showErrorMessage(`mcphost ${args.join(' ')}: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    }
  }

  void daemon.start();
  return { daemon };
}

async function openFile(file: string, what: string): Promise<void> {
  const uri = vscode.Uri.file(file);
  try {
    await vscode.workspace.fs.stat(uri);
  } catch {
    void vscode.window.showWarningMessage(`mcphost: ${what} does not exist yet: ${file}`);
    return;
  }
  const doc = await vscode.workspace.openTextDocument(uri);
  await vscode.window.showTextDocument(doc);
}

interface GrantPick extends vscode.QuickPickItem {
  grant?: GrantInfo;
  all?: boolean;
}

async function manageGrants(daemon: Daemon): Promise<void> {
  let grants: GrantInfo[];
  try {
    grants = (await daemon.listGrants()).grants ?? [];
  } catch (error) {
    void vscode.window.showErrorMessage(`mcphost: cannot list grants: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  if (grants.length === 0) {
    void vscode.window.showInformationMessage('mcphost: no remembered approvals.');
    return;
  }
  const time = (iso: string) => formatTime(iso, new Date());
  const items: GrantPick[] = grants.map((grant) => ({ ...grantItemText(grant, time), grant }));
  items.push({ label: '', kind: vscode.QuickPickItemKind.Separator });
  items.push({ label: 'Revoke all remembered approvals', all: true });
  const picked = await vscode.window.showQuickPick(items, {
    title: 'mcphost: remembered approvals',
    placeHolder: 'Pick the approvals to revoke',
    canPickMany: true,
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!picked || picked.length === 0) {
    return;
  }
  if (picked.some((item) => item.all)) {
    await revokeAll(daemon);
    return;
  }
  const ids = picked.flatMap((item) => (item.grant ? [item.grant.id] : []));
  try {
    const result = await daemon.revokeGrants({ ids });
    void vscode.window.showInformationMessage(`mcphost: revoked ${result.revoked.length} approval(s).`);
  } catch (error) {
    void vscode.window.showErrorMessage(`mcphost: cannot revoke: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function revokeAll(daemon: Daemon): Promise<void> {
  const confirm = await vscode.window.showWarningMessage(
    'mcphost: revoke every remembered approval? Agents will be asked again.',
    { modal: true },
    'Revoke All',
  );
  if (confirm !== 'Revoke All') {
    return;
  }
  try {
    const result = await daemon.revokeGrants({ all: true });
    void vscode.window.showInformationMessage(`mcphost: revoked ${result.revoked.length} approval(s).`);
  } catch (error) {
    void vscode.window.showErrorMessage(`mcphost: cannot revoke: ${error instanceof Error ? error.message : String(error)}`);
  }
}

export function deactivate(): Promise<void> | undefined {
  // Closing the channel ends this window's own daemon (it exits when its editor goes away), or only detaches this
  // window from the daemon of another window or a terminal.
  const daemon = active;
  active = undefined;
  return daemon?.stop();
}
