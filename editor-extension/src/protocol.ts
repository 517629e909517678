/**
 * The editor channel's method names and payloads, mirroring mcphost/editor/protocol.py (the daemon's one source
 * of truth) and the JSON Schemas generated from it into schemas/editor/. test/protocol.test.ts checks every
 * payload below against those schemas: field names, which fields are required, and enum values.
 *
 * Payloads are open: a newer daemon may add fields, and this extension ignores the ones it does not know.
 * Fields that may be null are sent as null by some messages and left out by others: both are accepted.
 */

// server -> client request: a call waits for a person's decision
export const PERMISSION_REQUEST = 'mcphost/permissionRequest';
// server -> client request, to clients that set initializationOptions.batch: calls from one agent session that asked
// within [permissions] batch_window, for one answer (allow all / deny all) or one by one
export const PERMISSION_BATCH = 'mcphost/permissionBatch';
// server -> client notification: one activity record (as written to activity.jsonl)
export const ACTIVITY = 'mcphost/activity';
// server -> client notification on change, and client -> server request: the daemon's state
export const STATUS = 'mcphost/status';
// client -> server requests: remembered approvals
export const GRANTS_LIST = 'mcphost/grants';
export const GRANTS_REVOKE = 'mcphost/revokeGrants';
// client -> server request from an agent's hook (`mcphost hook`): the extension never sends it
export const AUTHORIZE = 'mcphost/authorize';
// client -> server request from `mcphost config show` (the config in force): the extension never sends it
export const CONFIG = 'mcphost/config';
// standard JSON-RPC cancellation, sent when a prompt is answered elsewhere, expires, or its call ends
export const CANCEL_REQUEST = '$/cancelRequest';

export const PROTOCOL_VERSION = 1;

/** Methods by the schema file that describes their payload (the schema's title names the method). */
export const SCHEMA_METHODS: Record<string, string> = {
  'permission-request': PERMISSION_REQUEST,
  'permission-response': PERMISSION_REQUEST,
  'permission-batch': PERMISSION_BATCH,
  'permission-batch-result': PERMISSION_BATCH,
  status: STATUS,
  activity: ACTIVITY,
  'grants-result': GRANTS_LIST,
  'revoke-grants-params': GRANTS_REVOKE,
  'revoke-grants-result': GRANTS_REVOKE,
  'authorize-params': AUTHORIZE,
  'authorize-result': AUTHORIZE,
  'config-result': CONFIG,
};

/** What the extension tells the daemon in `initialize`. */
export interface InitializationOptions {
  /** Send this editor permission prompts. */
  approver: boolean;
  /** Send this editor `mcphost/activity` notifications. */
  activity: boolean;
  /** Send this editor `mcphost/permissionBatch` for calls from one agent session that ask within a short window
   * (else each comes as its own `mcphost/permissionRequest`). */
  batch: boolean;
}

export const ANSWERS = ['allow', 'deny'] as const;
export type Answer = (typeof ANSWERS)[number];

export const REMEMBER = ['once', 'session', 'always'] as const;
export type Remember = (typeof REMEMBER)[number];

/** What a remembered allow covers besides the tool: any arguments, exactly these, or arguments matching globs. */
export const MATCHES = ['tool', 'arguments', 'pattern'] as const;
export type GrantMatch = (typeof MATCHES)[number];

export const OPERATIONS = ['read', 'write', 'destructive'] as const;
export type Operation = (typeof OPERATIONS)[number];

export const ACTIONS = ['ask', 'confirm'] as const;
export type PromptAction = (typeof ACTIONS)[number];

export interface PromptIntent {
  /** read | write | destructive, as the agent declared it. */
  operation_type: string;
  /** public | internal | private | unknown */
  data_sensitivity?: string | null;
  /** The agent's own words: untrusted text, shown as plain text, never as markup. */
  reason?: string | null;
}

/** `mcphost/permissionRequest` params: everything a person needs to decide on one call. */
export interface PermissionRequest {
  id: string;
  /** call_tool_read | call_tool_write | call_tool_destructive */
  variant: string;
  operation: Operation;
  /** ask (a quick yes or no) or confirm (a deliberate confirmation). */
  action: PromptAction;
  server: string;
  tool: string;
  /** The tool's arguments after redaction, when small enough. */
  arguments?: Record<string, unknown> | null;
  /** The start of the redacted arguments' JSON, when they were too large to send. */
  arguments_preview?: string | null;
  intent: PromptIntent;
  annotations: Record<string, unknown>;
  call_with: string;
  warnings: string[];
  /** RFC 3339, UTC. */
  expires_at: string;
  /** The remember scopes the daemon accepts for this call. */
  remember_options: Remember[];
  session_id?: string | null;
  client?: string | null;
  /** What asks for the person: the config key (permissions.write) or rule (rules[2]) that decided. */
  rule?: string | null;
  /** That rule's `reason`, from the person's own config (still shown as bounded plain text). */
  rule_reason?: string | null;
  /** What a remembered allow may be narrowed to. Sent by newer daemons; empty or absent: the tool only. */
  match_options: GrantMatch[];
  /** A starting point for a pattern grant: argument name -> glob (fnmatch), for the person to edit and confirm. */
  suggested_pattern?: Record<string, string> | null;
}

/** `mcphost/permissionRequest` result. */
export interface PermissionResponse {
  decision: Answer;
  /** Ignored for deny. */
  remember?: Remember;
  /** What the remembered allow covers (session or always only): one of the request's match_options. */
  match?: GrantMatch;
  /** match = pattern: argument name -> glob, as the person confirmed it (the call must match it). */
  pattern?: Record<string, string> | null;
}

/** One call's answer in a `mcphost/permissionBatch` result. */
export interface BatchAnswer extends PermissionResponse {
  /** The id of the request in the batch this answers. */
  id: string;
  /** server:tool, exactly as the request names them: required to allow a destructive call in a batch. */
  confirmed?: string | null;
}

/** `mcphost/permissionBatch` params: calls from one agent session that asked within a short window. */
export interface PermissionBatch {
  id: string;
  session_id?: string | null;
  client?: string | null;
  /** Two or more, in the order they asked. */
  requests: PermissionRequest[];
  /** When the first of them stops waiting (RFC 3339, UTC). */
  expires_at: string;
}

/** `mcphost/permissionBatch` result: a request left unanswered is denied. */
export interface PermissionBatchResult {
  answers: BatchAnswer[];
}

export interface UpstreamStatus {
  name: string;
  /** stdio | http */
  transport: string;
  /** starting | connected | failed | stopped ... */
  state: string;
  tools: number;
  error?: string | null;
  /** the MCP revision the connection speaks (e.g. 2026-07-28), while connected */
  protocol?: string | null;
}

export interface EditorInfo {
  id: string;
  name: string;
  transport: 'stdio' | 'socket';
  attached_at: string;
}

export interface PendingPrompt {
  id: string;
  variant: string;
  server: string;
  tool: string;
  expires_at: string;
}

export interface McpEndpoint {
  url?: string | null;
  headers: Record<string, string>;
}

/** The activity stream's export to an OpenTelemetry collector (`[export.otlp]`). */
export interface ExportStatus {
  endpoint: string;
  queued: number;
  exported: number;
  dropped: number;
  last_error?: string | null;
  last_error_at?: string | null;
  last_export_at?: string | null;
}

/** `mcphost/status`: notification params on every change, and the result of the request. */
export interface StatusPayload {
  version: string;
  protocol: number;
  pid: number;
  mcp: McpEndpoint;
  config_path: string;
  log_path: string;
  editor_socket?: string | null;
  servers: UpstreamStatus[];
  pending: number;
  prompts: PendingPrompt[];
  editors: EditorInfo[];
  config_error?: string | null;
  log_error?: string | null;
  export?: ExportStatus | null;
}

export interface GrantInfo {
  id: string;
  scope: 'session' | 'always';
  server: string;
  tool: string;
  variant: string;
  granted_at: string;
  session_id?: string | null;
  approver?: string | null;
  /** What the grant covers besides the tool (older daemons leave it out: the tool). */
  match: GrantMatch;
  /** match = pattern: argument name -> glob. */
  pattern?: Record<string, string> | null;
  /** match = arguments: the start of the (redacted) arguments it was given for. */
  arguments_preview?: string | null;
}

/** `mcphost/grants` result. */
export interface GrantsResult {
  grants: GrantInfo[];
}

/** `mcphost/revokeGrants` params: grant ids, every grant of one `server:tool`, or all of them. */
export interface RevokeGrantsParams {
  ids?: string[];
  /** server:tool */
  tool?: string | null;
  all?: boolean;
}

export interface RevokeGrantsResult {
  revoked: GrantInfo[];
}

// ---- the activity record (schemas/activity-record.schema.json): one line of activity.jsonl

export interface Decision {
  /** policy | editor | remembered_grant | timeout | no_approver */
  by: string;
  /** allow | ask | confirm | deny */
  action: string;
  /** allow | deny | expired */
  outcome: string;
  rule?: string | null;
  /** The deciding rule's reason, when it gave one. */
  reason?: string | null;
  at: string;
  wait_ms?: number | null;
  remember?: string | null;
  approver?: string | null;
  /** What a remembered allow covers besides its tool: arguments | pattern (else absent). */
  match?: string | null;
  /** The batch prompt the person answered, when it was one. */
  batch?: string | null;
}

export interface ErrorInfo {
  code: string;
  message: string;
}

export interface RecordIntent {
  operation_type?: string | null;
  data_sensitivity?: string | null;
  reason?: string | null;
  raw?: string | null;
}

export interface RecordMetadata {
  intent?: RecordIntent | null;
  tool_variant?: string | null;
  annotations?: Record<string, unknown> | null;
  call_with?: string | null;
  /** On hook_decision records: the agent, the hook event, the tool as the agent named it, why it was judged so. */
  hook?: Record<string, unknown> | null;
}

export interface ActivityRecord {
  id: string;
  timestamp: string;
  /** tool_call | tool_call_started | hook_decision | config_reload | config_error | upstream_connected | ... */
  type: string;
  server?: string | null;
  tool?: string | null;
  /** success | error | rejected | denied | expired | cancelled | started (tool_call_started) | allowed | asked (hook_decision) */
  status?: string | null;
  duration_ms?: number | null;
  metadata: RecordMetadata;
  decision?: Decision | null;
  warnings: string[];
  error?: ErrorInfo | null;
  arguments?: Record<string, unknown> | null;
  arguments_preview?: string | null;
  request_bytes?: number | null;
  response_bytes?: number | null;
  response_preview?: string | null;
  session_id?: string | null;
  client?: string | null;
  details?: Record<string, unknown> | null;
  /** On a write or destructive call's outcome: the id of its `tool_call_started` record, which it replaces. */
  started_id?: string | null;
  /** Whether a cancelled or failed call had reached the upstream server. */
  forwarded?: boolean | null;
}

// ---- field lists, for the schema check. Their types make them list every field of the interface above, and
// mark each one required or optional exactly as the interface does: the compiler keeps them in step with the
// interfaces, and test/protocol.test.ts keeps them in step with the daemon's schemas.

type Presence<T> = { [K in keyof T]-?: object extends Pick<T, K> ? 'optional' : 'required' };

export const FIELDS = {
  PermissionRequest: {
    id: 'required',
    variant: 'required',
    operation: 'required',
    action: 'required',
    server: 'required',
    tool: 'required',
    arguments: 'optional',
    arguments_preview: 'optional',
    intent: 'required',
    annotations: 'required',
    call_with: 'required',
    warnings: 'required',
    expires_at: 'required',
    remember_options: 'required',
    session_id: 'optional',
    client: 'optional',
    rule: 'optional',
    rule_reason: 'optional',
    match_options: 'required',
    suggested_pattern: 'optional',
  } satisfies Presence<PermissionRequest>,
  PromptIntent: {
    operation_type: 'required',
    data_sensitivity: 'optional',
    reason: 'optional',
  } satisfies Presence<PromptIntent>,
  PermissionResponse: {
    decision: 'required',
    remember: 'optional',
    match: 'optional',
    pattern: 'optional',
  } satisfies Presence<PermissionResponse>,
  BatchAnswer: {
    id: 'required',
    decision: 'required',
    remember: 'optional',
    match: 'optional',
    pattern: 'optional',
    confirmed: 'optional',
  } satisfies Presence<BatchAnswer>,
  PermissionBatch: {
    id: 'required',
    session_id: 'optional',
    client: 'optional',
    requests: 'required',
    expires_at: 'required',
  } satisfies Presence<PermissionBatch>,
  PermissionBatchResult: { answers: 'required' } satisfies Presence<PermissionBatchResult>,
  StatusPayload: {
    version: 'required',
    protocol: 'required',
    pid: 'required',
    mcp: 'required',
    config_path: 'required',
    log_path: 'required',
    editor_socket: 'optional',
    servers: 'required',
    pending: 'required',
    prompts: 'required',
    editors: 'required',
    config_error: 'optional',
    log_error: 'optional',
    export: 'optional',
  } satisfies Presence<StatusPayload>,
  ExportStatus: {
    endpoint: 'required',
    queued: 'required',
    exported: 'required',
    dropped: 'required',
    last_error: 'optional',
    last_error_at: 'optional',
    last_export_at: 'optional',
  } satisfies Presence<ExportStatus>,
  UpstreamStatus: {
    name: 'required',
    transport: 'required',
    state: 'required',
    tools: 'required',
    error: 'optional',
    protocol: 'optional',
  } satisfies Presence<UpstreamStatus>,
  EditorInfo: {
    id: 'required',
    name: 'required',
    transport: 'required',
    attached_at: 'required',
  } satisfies Presence<EditorInfo>,
  PendingPrompt: {
    id: 'required',
    variant: 'required',
    server: 'required',
    tool: 'required',
    expires_at: 'required',
  } satisfies Presence<PendingPrompt>,
  McpEndpoint: { url: 'optional', headers: 'required' } satisfies Presence<McpEndpoint>,
  GrantInfo: {
    id: 'required',
    scope: 'required',
    server: 'required',
    tool: 'required',
    variant: 'required',
    granted_at: 'required',
    session_id: 'optional',
    approver: 'optional',
    match: 'required',
    pattern: 'optional',
    arguments_preview: 'optional',
  } satisfies Presence<GrantInfo>,
  GrantsResult: { grants: 'required' } satisfies Presence<GrantsResult>,
  RevokeGrantsParams: { ids: 'optional', tool: 'optional', all: 'optional' } satisfies Presence<RevokeGrantsParams>,
  RevokeGrantsResult: { revoked: 'required' } satisfies Presence<RevokeGrantsResult>,
  ActivityRecord: {
    id: 'required',
    timestamp: 'required',
    type: 'required',
    server: 'optional',
    tool: 'optional',
    status: 'optional',
    duration_ms: 'optional',
    metadata: 'required',
    decision: 'optional',
    warnings: 'required',
    error: 'optional',
    arguments: 'optional',
    arguments_preview: 'optional',
    request_bytes: 'optional',
    response_bytes: 'optional',
    response_preview: 'optional',
    session_id: 'optional',
    client: 'optional',
    details: 'optional',
    started_id: 'optional',
    forwarded: 'optional',
  } satisfies Presence<ActivityRecord>,
  Decision: {
    by: 'required',
    action: 'required',
    outcome: 'required',
    rule: 'optional',
    reason: 'optional',
    at: 'required',
    wait_ms: 'optional',
    remember: 'optional',
    approver: 'optional',
    match: 'optional',
    batch: 'optional',
  } satisfies Presence<Decision>,
  ErrorInfo: { code: 'required', message: 'required' } satisfies Presence<ErrorInfo>,
  RecordIntent: {
    operation_type: 'optional',
    data_sensitivity: 'optional',
    reason: 'optional',
    raw: 'optional',
  } satisfies Presence<RecordIntent>,
  RecordMetadata: {
    intent: 'optional',
    tool_variant: 'optional',
    annotations: 'optional',
    call_with: 'optional',
    hook: 'optional',
  } satisfies Presence<RecordMetadata>,
} as const;

/** Enumerations the schemas pin, by `Payload.field` (or a `$defs` name). */
export const ENUMS: Record<string, readonly string[]> = {
  'PermissionRequest.operation': OPERATIONS,
  'PermissionRequest.action': ACTIONS,
  Remember: REMEMBER,
  Answer: ANSWERS,
  GrantMatch: MATCHES,
  'EditorInfo.transport': ['stdio', 'socket'],
  'GrantInfo.scope': ['session', 'always'],
};

// ---- light runtime checks for what arrives (the daemon is trusted to send the shape; these keep a malformed
// message from throwing deep in the UI code)

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function isPermissionRequest(value: unknown): value is PermissionRequest {
  return (
    isObject(value) &&
    typeof value.id === 'string' &&
    typeof value.server === 'string' &&
    typeof value.tool === 'string' &&
    typeof value.variant === 'string' &&
    isObject(value.intent)
  );
}

export function isPermissionBatch(value: unknown): value is PermissionBatch {
  return (
    isObject(value) &&
    typeof value.id === 'string' &&
    Array.isArray(value.requests) &&
    value.requests.length > 0 &&
    value.requests.every(isPermissionRequest)
  );
}

export function isStatusPayload(value: unknown): value is StatusPayload {
  return isObject(value) && typeof value.version === 'string' && isObject(value.mcp) && Array.isArray(value.servers);
}

export function isActivityRecord(value: unknown): value is ActivityRecord {
  return isObject(value) && typeof value.id === 'string' && typeof value.timestamp === 'string';
}
