/**
 * The one object that owns the daemon: the LanguageClient that spawns `mcphost serve --stdio` and speaks the
 * editor channel, the LogOutputChannel with the daemon's own log, and the connection state that the status items
 * (statusItems.ts) show.
 */

import * as vscode from 'vscode';
import {
  type CancellationToken,
  LanguageClient,
  type LanguageClientOptions,
  ResponseError,
  LSPErrorCodes,
  type ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';

import * as p from './protocol';
import { type McphostCommand, parseDaemonLogLine, serveArgs } from './settings';
import { StatusItems } from './statusItems';
import type { ConnectionState } from './statusText';
import { resolveMcphost } from './workspaceSettings';

export type PermissionHandler = (request: p.PermissionRequest, token: CancellationToken) => Promise<p.PermissionResponse>;

export class Daemon implements vscode.Disposable {
  readonly log: vscode.LogOutputChannel;
  private readonly statusItems: StatusItems;
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  private disposables: vscode.Disposable[] = [];
  private clientDisposables: vscode.Disposable[] = [];

  private _state: ConnectionState = 'stopped';
  private _status: p.StatusPayload | undefined;
  private _error: string | undefined;
  private _command: McphostCommand | undefined;

  private readonly statusEmitter = new vscode.EventEmitter<p.StatusPayload | undefined>();
  private readonly activityEmitter = new vscode.EventEmitter<p.ActivityRecord>();
  /** The daemon's status: on every change, and undefined when the daemon goes away. */
  readonly onDidChangeStatus = this.statusEmitter.event;
  readonly onActivity = this.activityEmitter.event;

  /** Answers `mcphost/permissionRequest`; until one is set, every prompt is denied. */
  onPermissionRequest: PermissionHandler = () => Promise.resolve({ decision: 'deny', remember: 'once' });

  constructor() {
    this.log = vscode.window.createOutputChannel('mcphost', { log: true });
    this.statusItems = new StatusItems();
    this.disposables.push(this.log, this.statusItems, this.statusEmitter, this.activityEmitter);
    this.render();
  }

  get state(): ConnectionState {
    return this._state;
  }

  get status(): p.StatusPayload | undefined {
    return this._status;
  }

  /** The command the daemon was started with (also used for the CLI commands: log tail, activity show). */
  get command(): McphostCommand | undefined {
    return this._command;
  }

  async start(): Promise<void> {
    if (this.starting) {
      return this.starting;
    }
    this.starting = this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const resolved = resolveMcphost();
    if (!resolved.ok) {
      this._command = undefined;
      this.setState('failed', resolved.error);
      this.log.error(resolved.error);
      const choice = await vscode.window.showErrorMessage(`mcphost: ${resolved.error}`, 'Open Settings');
      if (choice === 'Open Settings') {
        await vscode.commands.executeCommand('workbench.action.openSettings', 'mcphost.');
      }
      return;
    }
    const command = resolved.command;
    this._command = command;
    const args = serveArgs(command, this.log.logLevel);
    this.log.info(`starting the daemon: ${command.command} ${args.join(' ')} --stdio (found via ${command.source})`);
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const serverOptions: ServerOptions = {
      command: command.command,
      args,
      transport: TransportKind.stdio,
      options: { env: { ...process.env, ...command.env }, ...(cwd ? { cwd } : {}) },
    };
    const initializationOptions: p.InitializationOptions = { approver: true, activity: true };
    const clientOptions: LanguageClientOptions = {
      // The channel carries no documents: only mcphost's own methods and the config file's diagnostics.
      documentSelector: [],
      initializationOptions,
      outputChannel: this.log,
      traceOutputChannel: this.log,
      stdioOptions: {
        stderr: (input, channel) => {
          let buffered = '';
          input.setEncoding('utf8');
          input.on('data', (chunk: string) => {
            buffered += chunk;
            const lines = buffered.split(/\r?\n/);
            buffered = lines.pop() ?? '';
            for (const line of lines) {
              if (line) {
                const { level, text } = parseDaemonLogLine(line);
                channel[level](text);
              }
            }
          });
        },
        stdout: () => undefined,
      },
      connectionOptions: { maxRestartCount: 3 },
      diagnosticCollectionName: 'mcphost',
    };
    const client = new LanguageClient('mcphost', 'mcphost', serverOptions, clientOptions);
    this.client = client;
    this.clientDisposables.push(
      client.onDidChangeState((event) => {
        if (event.newState === State.Running) {
          this.setState('connected');
        } else if (event.newState === State.Starting) {
          this.setState('starting');
        } else {
          this._status = undefined;
          this.statusEmitter.fire(undefined);
          this.setState(this._state === 'failed' ? 'failed' : 'stopped', this._error);
        }
      }),
      client.onRequest(p.PERMISSION_REQUEST, async (params: unknown, token: CancellationToken) => {
        if (!p.isPermissionRequest(params)) {
          this.log.warn('a permission request without the fields a prompt needs; denied');
          return { decision: 'deny', remember: 'once' } satisfies p.PermissionResponse;
        }
        const answer = await this.onPermissionRequest(params, token);
        if (token.isCancellationRequested) {
          return new ResponseError(LSPErrorCodes.RequestCancelled, 'the prompt was withdrawn');
        }
        return answer;
      }),
      client.onNotification(p.STATUS, (params: unknown) => this.acceptStatus(params)),
      client.onNotification(p.ACTIVITY, (params: unknown) => {
        if (p.isActivityRecord(params)) {
          this.activityEmitter.fire(params);
        }
      }),
    );
    this.setState('starting');
    try {
      await client.start();
      const status: unknown = await client.sendRequest(p.STATUS, {});
      this.acceptStatus(status);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.log.error(`the daemon did not start: ${message}`);
      this.setState('failed', `the daemon did not start: ${message}`);
    }
  }

  private acceptStatus(params: unknown): void {
    if (!p.isStatusPayload(params)) {
      return;
    }
    if (params.protocol !== undefined && params.protocol !== p.PROTOCOL_VERSION) {
      this.log.warn(`the daemon speaks editor protocol ${params.protocol}; this extension knows ${p.PROTOCOL_VERSION}`);
    }
    this._status = params;
    if (params.config_path) {
      this.statusItems.showBesideConfig(params.config_path);
    }
    this.render();
    this.statusEmitter.fire(params);
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables.splice(0)) {
      d.dispose();
    }
    if (client) {
      try {
        if (client.isRunning()) {
          await client.stop(5000);
        }
      } catch (error) {
        this.log.warn(`stopping the daemon: ${error instanceof Error ? error.message : String(error)}`);
      }
      await client.dispose().catch(() => undefined);
    }
    this._status = undefined;
    this.statusEmitter.fire(undefined);
    this.setState('stopped');
  }

  async restart(): Promise<void> {
    this.log.info('restarting the daemon');
    await this.stop();
    await this.start();
  }

  async request<R>(method: string, params: unknown): Promise<R> {
    const client = this.client;
    if (!client || !client.isRunning()) {
      throw new Error('the mcphost daemon is not running');
    }
    return client.sendRequest<R>(method, params);
  }

  listGrants(): Promise<p.GrantsResult> {
    return this.request<p.GrantsResult>(p.GRANTS_LIST, {});
  }

  revokeGrants(params: p.RevokeGrantsParams): Promise<p.RevokeGrantsResult> {
    return this.request<p.RevokeGrantsResult>(p.GRANTS_REVOKE, params);
  }

  private setState(state: ConnectionState, error?: string): void {
    this._state = state;
    this._error = error;
    this.render();
  }

  private render(): void {
    this.statusItems.render(this._state, this._status, this._error);
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables.splice(0)) {
      d.dispose();
    }
  }
}
