/**
 * The one object that owns the daemon: the LanguageClient that speaks the editor channel, the LogOutputChannel with
 * the daemon's own log, and the connection state that the status items (statusItems.ts) show.
 *
 * The channel goes to the daemon this window spawns (`mcphost serve --stdio`), or, when another window or a
 * terminal already runs one for the same config (serve then refuses with exit status 3), to that daemon's editor
 * socket, which speaks the same protocol; when that connection closes, the window spawns its own again. What to do
 * after each ending is decided in sharedDaemon.ts.
 */

import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import * as net from 'node:net';
import * as vscode from 'vscode';
import {
  type CancellationToken,
  CloseAction,
  type CloseHandlerResult,
  ErrorAction,
  LanguageClient,
  type LanguageClientOptions,
  LSPErrorCodes,
  ResponseError,
  State,
  type StreamInfo,
} from 'vscode-languageclient/node';

import { runCli } from './activityView';
import { DaemonLogReader } from './daemonLog';
import { type Identity, type VersionRun, checkIdentity, commandText } from './identity';
import * as p from './protocol';
import { type McphostCommand, type Resolution, serveArgs } from './settings';
import {
  type ConnectionEnd,
  type DaemonLink,
  EXIT_ANOTHER_DAEMON,
  FRESH,
  type NextStep,
  OWN,
  type ReconnectHistory,
  attachTarget,
  connected,
  nextStep,
  parseRefusal,
  pastOneDaemonCheck,
  sharedDaemonText,
} from './sharedDaemon';
import { StatusItems } from './statusItems';
import type { ConnectionState } from './statusText';
import { resolveMcphost } from './workspaceSettings';

export type PermissionHandler = (request: p.PermissionRequest, token: CancellationToken) => Promise<p.PermissionResponse>;
export type BatchHandler = (batch: p.PermissionBatch, token: CancellationToken) => Promise<p.PermissionBatchResult>;

/** A daemon that prints nothing on its way up is handed the channel after this long all the same. */
const PAST_CHECK_TIMEOUT_MS = 15_000;
/** How long a socket may take to accept, and `mcphost status` to answer, before the window tries otherwise. */
const ATTACH_TIMEOUT_MS = 5_000;
const STATUS_TIMEOUT_MS = 10_000;

/**
 * The LanguageClient, quiet about a start that this window called off itself (stopped or restarted while it was
 * still connecting): vscode-languageclient would report that as a failure to connect, in a notification.
 */
class DaemonClient extends LanguageClient {
  cancelled = false;

  override error(message: string, data?: unknown, showNotification: boolean | 'force' = true): void {
    super.error(message, data, this.cancelled ? false : showNotification);
  }
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why it could not be run at all. */
  error?: string;
}

/** A `serve --stdio` this window started. */
interface SpawnedDaemon {
  process: ChildProcessWithoutNullStreams;
  /** 'past check' once it is past the one-daemon check (or said nothing for too long); else how it ended before. */
  ready: Promise<'past check' | Exit>;
  exited: Promise<Exit>;
  /** What it printed on stderr before it was past the check: the refusal, if it was refused. */
  earlyStderr(): string;
}

export class Daemon implements vscode.Disposable {
  readonly log: vscode.LogOutputChannel;
  private readonly statusItems: StatusItems;
  private client: DaemonClient | undefined;
  private starting: Promise<void> | undefined;
  private disposables: vscode.Disposable[] = [];
  private clientDisposables: vscode.Disposable[] = [];

  // The connection under way: through a daemon this window spawned, or another's socket.
  private link: DaemonLink = OWN;
  private child: SpawnedDaemon | undefined;
  private socket: net.Socket | undefined;
  /** Whether the current connection got as far as running: its ending is then a drop, not a failed start. */
  private wasUp = false;
  private history: ReconnectHistory = FRESH;

  private _state: ConnectionState = 'stopped';
  private _status: p.StatusPayload | undefined;
  private _error: string | undefined;
  private _command: McphostCommand | undefined;
  private readonly verified = new Map<string, Identity>();

  private readonly statusEmitter = new vscode.EventEmitter<p.StatusPayload | undefined>();
  private readonly activityEmitter = new vscode.EventEmitter<p.ActivityRecord>();
  /** The daemon's status: on every change, and undefined when the daemon goes away. */
  readonly onDidChangeStatus = this.statusEmitter.event;
  readonly onActivity = this.activityEmitter.event;

  /** Answers `mcphost/permissionRequest`; until one is set, every prompt is denied. */
  onPermissionRequest: PermissionHandler = () => Promise.resolve({ decision: 'deny', remember: 'once' });
  /** Answers `mcphost/permissionBatch`; until one is set, every call in a batch is denied (left unanswered). */
  onPermissionBatch: BatchHandler = () => Promise.resolve({ answers: [] });

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

  /** How this window reaches the daemon: its own, or one another window or a terminal started. */
  get daemonLink(): DaemonLink {
    return this.link;
  }

  /** The command the daemon was started with (also used for the CLI commands: log tail, activity show). */
  get command(): McphostCommand | undefined {
    return this._command;
  }

  async start(): Promise<void> {
    if (this.starting) {
      return this.starting;
    }
    if (this.client?.isRunning()) {
      return;
    }
    this.starting = this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /**
   * The mcphost command for the current settings, once its `--version` says it is this project's (see identity.ts);
   * a command already checked is not run again until the daemon restarts.
   */
  async resolveVerified(): Promise<Resolution> {
    const resolved = resolveMcphost();
    if (!resolved.ok) {
      return resolved;
    }
    const key = JSON.stringify([resolved.command.command, resolved.command.prefix]);
    let identity = this.verified.get(key);
    if (!identity) {
      identity = checkIdentity(resolved.command, await runVersion(resolved.command, workspaceCwd()));
      if (identity.ok) {
        this.verified.set(key, identity);
        this.log.info(`${identity.line}: ${commandText(resolved.command)} (found via ${resolved.command.source})`);
      }
    }
    return identity.ok ? resolved : { ok: false, error: identity.error };
  }

  private async doStart(): Promise<void> {
    if (this.client) {
      // One that gave up (a client cannot be started again) goes before the next one comes.
      await this.stop();
    }
    this.verified.clear();
    const resolved = await this.resolveVerified();
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
    this.history = FRESH;
    // batch: calls from one agent session that ask together come as one mcphost/permissionBatch.
    const initializationOptions: p.InitializationOptions = { approver: true, activity: true, batch: true };
    const clientOptions: LanguageClientOptions = {
      // The channel carries no documents: only mcphost's own methods and the config file's diagnostics.
      documentSelector: [],
      initializationOptions,
      outputChannel: this.log,
      traceOutputChannel: this.log,
      errorHandler: {
        // As vscode-languageclient's default: a few garbled messages are let go, more end the connection.
        error: (_error, _message, count) => ({
          action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown,
        }),
        closed: () => this.connectionClosed(client),
      },
      diagnosticCollectionName: 'mcphost',
    };
    // The transport is ours, not an Executable: a refused daemon must never reach the client (it would report a
    // failed start, and restart into the same refusal), and the window attaches elsewhere instead.
    const client: DaemonClient = new DaemonClient(
      'mcphost',
      'mcphost',
      (): Promise<StreamInfo> => this.connect(client, command),
      clientOptions,
    );
    this.client = client;
    this.clientDisposables.push(
      client.onDidChangeState((event) => {
        if (client !== this.client) {
          return;
        }
        if (event.newState === State.Running) {
          this.wasUp = true;
          this.history = connected(this.history);
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
      client.onRequest(p.PERMISSION_BATCH, async (params: unknown, token: CancellationToken) => {
        if (!p.isPermissionBatch(params)) {
          // Every call of it is denied: a request left unanswered is.
          this.log.warn('a permission batch without the fields a prompt needs; every call in it denied');
          return { answers: [] } satisfies p.PermissionBatchResult;
        }
        const result = await this.onPermissionBatch(params, token);
        if (token.isCancellationRequested) {
          return new ResponseError(LSPErrorCodes.RequestCancelled, 'the batch was withdrawn');
        }
        return result;
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
      if (client.cancelled) {
        return;
      }
      const message = error instanceof Error ? error.message : String(error);
      this.log.error(`the daemon did not start: ${message}`);
      this.setState('failed', `the daemon did not start: ${message}`);
    }
  }

  /**
   * The client's transport, at its start and at every restart: a daemon of this window's own, or, while another
   * serves the config, that one's editor socket. Tries until one is up, as nextStep says; throws when it gives up.
   */
  private async connect(client: DaemonClient, command: McphostCommand): Promise<StreamInfo> {
    this.wasUp = false;
    let step: NextStep = { action: 'spawn', delayMs: 0 };
    for (;;) {
      if (client.cancelled) {
        throw new Error('stopped by this window');
      }
      if (step.action === 'give up') {
        this.setState('failed', step.error);
        throw new Error(step.error);
      }
      let end: ConnectionEnd;
      if (step.action === 'attach') {
        const { target } = step;
        this.link = { kind: 'shared', socket: target.socket, ...(target.pid !== undefined ? { pid: target.pid } : {}) };
        this.setState('starting');
        try {
          const socket = await connectSocket(target.socket, ATTACH_TIMEOUT_MS);
          if (client.cancelled) {
            socket.destroy();
            continue;
          }
          this.socket = socket;
          this.log.info(
            `this window uses ${sharedDaemonText(target.pid)}: attached to its editor socket ${target.socket} ` +
              `(found by ${target.source}). That daemon's own log is where it was started; when it ends, this ` +
              'window starts its own.',
          );
          return { reader: socket, writer: socket };
        } catch (error) {
          const why = error instanceof Error ? error.message : String(error);
          this.log.warn(`${sharedDaemonText(target.pid)} did not answer at ${target.socket}: ${why}`);
          end = { kind: 'detached', wasUp: false, ...(target.pid !== undefined ? { pid: target.pid } : {}), why };
        }
      } else {
        const delayMs = step.delayMs;
        if (delayMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, delayMs));
          if (client.cancelled) {
            continue;
          }
        }
        this.link = OWN;
        this.setState('starting');
        const child = this.spawnDaemon(command);
        // Until it is past the check, stop() must be able to end it too.
        this.child = child;
        const first = await child.ready;
        if (client.cancelled) {
          // stop() has ended it, or will.
          continue;
        }
        if (first === 'past check') {
          // A write to a daemon that just ended fails; the connection reports that as a close.
          child.process.stdin.on('error', () => undefined);
          return { reader: child.process.stdout, writer: child.process.stdin };
        }
        this.child = undefined;
        const exit = first;
        if (exit.code === EXIT_ANOTHER_DAEMON) {
          const refusal = parseRefusal(child.earlyStderr());
          // `mcphost status` asks the daemons themselves, with this window's executable and environment (the
          // runtime dir among it): what it names is up now. The refusal's own words are the fallback.
          const status = await runCli(command, ['status', '-o', 'json'], STATUS_TIMEOUT_MS, workspaceCwd()).catch(
            (error: unknown) => {
              this.log.warn(`mcphost status: ${error instanceof Error ? error.message : String(error)}`);
              return undefined;
            },
          );
          end = { kind: 'refused', refusal, target: attachTarget(status, refusal, command.configPath) };
        } else {
          const lines = child.earlyStderr().trim().split('\n');
          end = { kind: 'exited', code: exit.code, signal: exit.signal, wasUp: false, why: exit.error ?? lines.pop() };
        }
      }
      if (client.cancelled) {
        continue;
      }
      ({ step, history: this.history } = nextStep(end, this.history, Date.now()));
      if (step.action === 'attach') {
        this.log.info(`another daemon serves this config: this window attaches to ${sharedDaemonText(step.target.pid)}`);
      } else if (step.action === 'spawn') {
        this.log.info(`trying again in ${step.delayMs / 1000} s to start this window's own daemon`);
      }
    }
  }

  /** Spawns `mcphost serve --stdio`, its stderr into the log (each line at its level: daemonLog.ts). */
  private spawnDaemon(command: McphostCommand): SpawnedDaemon {
    const args = [...serveArgs(command, this.log.logLevel), '--stdio'];
    this.log.info(`starting the daemon: ${command.command} ${args.join(' ')} (found via ${command.source})`);
    const cwd = workspaceCwd();
    const child = spawn(command.command, args, {
      env: { ...process.env, ...command.env },
      stdio: 'pipe',
      ...(cwd ? { cwd } : {}),
    });
    const exited = new Promise<Exit>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', (error) => resolve({ code: null, signal: null, error: error.message }));
    });
    const early: string[] = [];
    let past = false;
    let pastCheck: () => void = () => undefined;
    const ready = new Promise<'past check' | Exit>((resolve) => {
      pastCheck = () => {
        past = true;
        resolve('past check');
      };
      setTimeout(pastCheck, PAST_CHECK_TIMEOUT_MS).unref();
      // 'close' comes once its stderr is read to the end too: the refusal is whole by then.
      child.once('close', () => void exited.then(resolve));
      void exited.then((exit) => setTimeout(() => resolve(exit), 1000).unref());
    });
    let buffered = '';
    const reader = new DaemonLogReader();
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split(/\r?\n/);
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (!line) {
          continue;
        }
        const { level, text } = reader.line(line);
        this.log[level](text);
        if (!past) {
          early.push(line);
          if (pastOneDaemonCheck(line)) {
            pastCheck();
          }
        }
      }
    });
    child.stdout.on('error', () => undefined);
    return { process: child, ready, exited, earlyStderr: () => [...early, buffered].join('\n') };
  }

  /** The connection closed without this window asking: decide, with nextStep, whether the client starts again. */
  private async connectionClosed(client: DaemonClient): Promise<CloseHandlerResult> {
    if (client.cancelled || client !== this.client) {
      // Stopped on purpose: stop() ends the rest.
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    const { wasUp, link, child, socket } = this;
    this.wasUp = false;
    this.child = undefined;
    this.socket = undefined;
    socket?.destroy();
    if (!wasUp) {
      // Closed on its way up: the start under way fails, and says why.
      if (child) {
        void reap(child);
      }
      this.setState('failed', 'the daemon closed the editor channel on its way up: see the mcphost output');
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    let end: ConnectionEnd;
    if (link.kind === 'shared') {
      this.log.warn(`${sharedDaemonText(link.pid)} closed this window's connection: it ended, or its window closed`);
      end = { kind: 'detached', wasUp: true, ...(link.pid !== undefined ? { pid: link.pid } : {}) };
    } else {
      const exit = child ? await within(child.exited, 3000) : undefined;
      if (child && !exit) {
        await reap(child);
      }
      if (client.cancelled) {
        return { action: CloseAction.DoNotRestart, handled: true };
      }
      const how = exit?.signal ? `was ended by ${exit.signal}` : exit ? `exited with code ${exit.code}` : 'closed the channel';
      this.log.error(`the daemon ${how}`);
      end = { kind: 'exited', code: exit?.code ?? null, signal: exit?.signal ?? null, wasUp: true };
    }
    const { step, history } = nextStep(end, this.history, Date.now());
    this.history = history;
    if (step.action === 'give up') {
      this.setState('failed', step.error);
      // Not handled: the client tells the person, with a way to the log.
      return { action: CloseAction.DoNotRestart, message: `mcphost: ${step.error}` };
    }
    this.log.info(link.kind === 'shared' ? "starting this window's own daemon" : 'restarting the daemon');
    // The client starts again through connect(), which spawns first: refused again, it attaches to whoever won.
    return { action: CloseAction.Restart, handled: true };
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
    const { client, child, socket } = this;
    this.client = undefined;
    this.child = undefined;
    this.socket = undefined;
    for (const d of this.clientDisposables.splice(0)) {
      d.dispose();
    }
    if (client) {
      client.cancelled = true;
      try {
        if (client.isRunning()) {
          await client.stop(5000);
        }
      } catch (error) {
        this.log.warn(`stopping the daemon: ${error instanceof Error ? error.message : String(error)}`);
      }
      await client.dispose().catch(() => undefined);
    }
    // Closing the channel detaches from another window's daemon, and ends this window's own (it exits when its
    // editor goes away); one that does not is ended, as vscode-languageclient ends a server it spawned itself.
    socket?.destroy();
    if (child) {
      child.process.stdin?.end();
      await reap(child);
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
    this.statusItems.render(this._state, this._status, this._error, this.link);
  }

  dispose(): void {
    void this.stop();
    for (const d of this.disposables.splice(0)) {
      d.dispose();
    }
  }
}

function workspaceCwd(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** The value, or undefined when it takes longer than `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    void promise.then((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

/** Waits a little for a daemon to exit, then ends it. */
async function reap(child: SpawnedDaemon, ms = 2000): Promise<void> {
  if ((await within(child.exited, ms)) === undefined) {
    child.process.kill();
  }
}

/** A connection to a daemon's editor socket (an owner-only Unix socket: mcphost/editor/listener.py). */
function connectSocket(socketPath: string, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    const fail = (error: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    const timer = setTimeout(() => fail(new Error(`it did not accept within ${timeoutMs / 1000} s`)), timeoutMs);
    socket.once('error', fail);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.off('error', fail);
      // The connection reports errors as a close; this keeps one after it is gone from being unhandled.
      socket.on('error', () => undefined);
      resolve(socket);
    });
  });
}

/** `mcphost --version` (with the interpreter's `-m mcphost`), in the daemon's environment. */
function runVersion(command: McphostCommand, cwd: string | undefined, timeoutMs = 15_000): Promise<VersionRun> {
  return new Promise((resolve) => {
    execFile(
      command.command,
      [...command.prefix, '--version'],
      { env: { ...process.env, ...command.env }, timeout: timeoutMs, ...(cwd ? { cwd } : {}) },
      (error, stdout, stderr) => {
        if (!error) {
          resolve({ stdout, stderr, code: 0 });
          return;
        }
        const code = typeof error.code === 'number' ? error.code : null;
        const why = error.killed ? `it did not answer within ${timeoutMs / 1000} s` : error.message;
        resolve({ stdout, stderr, code, error: why });
      },
    );
  });
}
