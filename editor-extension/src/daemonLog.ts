/**
 * The daemon's stderr, pure: which level each line goes to in the **mcphost** output channel.
 *
 * Most lines come through Python's logging (`mcphost: LEVEL logger: message`, set up in mcphost/cli/common.py).
 * A few reports are printed as they are, without a level (mcphost/host.py, the activity writer): a config save the
 * daemon rejected is one, and it is an error, not news. Lines that carry on a message (the indented issues of a
 * rejected config, a traceback) go where the message went.
 */

export type DaemonLogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export interface DaemonLogLine {
  level: DaemonLogLevel;
  text: string;
}

const LOGGING = /^mcphost: (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;
const LOGGING_LEVELS: Record<string, DaemonLogLevel> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};

/** The daemon's own reports without a logging level, by what they say, and the level they deserve. */
const PLAIN_REPORTS: { pattern: RegExp; level: DaemonLogLevel }[] = [
  // the activity writer: the log cannot be made durable
  { pattern: /^ERROR: /, level: 'error' },
  // a rejected config save (ConfigError's first line), and the note that follows it
  { pattern: /: invalid config \(\d+ problems?\)$/, level: 'error' },
  { pattern: /^the last good config stays in force/, level: 'error' },
  { pattern: /^config .* was removed; /, level: 'warn' },
];

const RANK: Record<DaemonLogLevel, number> = { trace: 0, debug: 1, info: 2, warn: 3, error: 4 };

/** One line on its own (no continuation): its level and the text to log. */
export function parseDaemonLogLine(line: string): DaemonLogLine {
  const logged = LOGGING.exec(line);
  if (logged) {
    return { level: LOGGING_LEVELS[logged[1]], text: logged[2] };
  }
  if (line.startsWith('mcphost: ')) {
    const rest = line.slice('mcphost: '.length);
    const report = PLAIN_REPORTS.find((r) => r.pattern.test(rest));
    if (report) {
      return { level: report.level, text: line };
    }
  }
  return { level: 'info', text: line };
}

/** Reads the daemon's stderr line by line, keeping a message's continuation lines at the message's level. */
export class DaemonLogReader {
  private current: DaemonLogLevel = 'info';
  private inTraceback = false;

  line(line: string): DaemonLogLine {
    if (line.startsWith('mcphost: ')) {
      this.inTraceback = false;
      const parsed = parseDaemonLogLine(line);
      this.current = parsed.level;
      return parsed;
    }
    if (/^Traceback \(most recent call last\):/.test(line)) {
      // An exception: at the level it was logged at, and an error if nothing logged it (the process crashed).
      this.inTraceback = true;
      this.current = RANK[this.current] >= RANK.warn ? this.current : 'error';
      return { level: this.current, text: line };
    }
    if (/^\s/.test(line)) {
      return { level: this.current, text: line };
    }
    if (this.inTraceback) {
      // The exception's own line ends the traceback.
      this.inTraceback = false;
      return { level: this.current, text: line };
    }
    this.current = 'info';
    return { level: 'info', text: line };
  }
}
