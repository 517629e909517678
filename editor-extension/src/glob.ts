/**
 * Globs as the daemon matches them, pure: Python's `fnmatch.translate` (what a pattern grant and a rule's `glob` are
 * compiled with), matched against the whole string, case-sensitive. `*` matches any run of characters, `/` and
 * newlines included; `?` one character; `[seq]` one character in seq (ranges `a-z`); `[!seq]` one not in it; a `[`
 * without its `]` is itself. Characters are Unicode code points, as in Python.
 *
 * The prompt checks a pattern the person edits against the call before it answers: the daemon refuses a pattern grant
 * the call itself does not match (it allows once and warns), so the two must agree on every glob. The class parsing
 * below follows fnmatch.translate step by step (its chunks, its dropping of empty ranges) and then reads the class as
 * Python's regular expression parser reads what translate wrote.
 */

type ClassItem = { lo: number; hi: number };

type Token =
  | { kind: 'star' }
  | { kind: 'any' }
  | { kind: 'char'; code: number }
  | { kind: 'class'; negate: boolean; items: ClassItem[] }
  | { kind: 'never' };

const code = (ch: string): number => ch.codePointAt(0) ?? 0;

/** A class's body as fnmatch.translate leaves it: chunks of literal characters, a range between each two. */
function classChunks(pat: string[], start: number, end: number): string[][] {
  const stuff = pat.slice(start, end);
  if (!stuff.includes('-')) {
    return [stuff];
  }
  const chunks: string[][] = [];
  let i = start;
  let k = pat[i] === '!' ? i + 2 : i + 1;
  for (;;) {
    k = k < end ? pat.indexOf('-', k) : -1;
    if (k < 0 || k >= end) {
      break;
    }
    chunks.push(pat.slice(i, k));
    i = k + 1;
    k = k + 3;
  }
  const chunk = pat.slice(i, end);
  if (chunk.length > 0) {
    chunks.push(chunk);
  } else {
    chunks[chunks.length - 1].push('-');
  }
  // Remove empty ranges (b-a): they are invalid in a regular expression.
  for (let k2 = chunks.length - 1; k2 > 0; k2--) {
    const before = chunks[k2 - 1];
    const after = chunks[k2];
    if (code(before[before.length - 1]) > code(after[0])) {
      chunks[k2 - 1] = [...before.slice(0, -1), ...after.slice(1)];
      chunks.splice(k2, 1);
    }
  }
  return chunks;
}

function classToken(chunks: string[][]): Token | undefined {
  if (chunks.length === 1 && chunks[0].length === 0) {
    return { kind: 'never' }; // an empty range: never matches
  }
  if (chunks.length === 1 && chunks[0].length === 1 && chunks[0][0] === '!') {
    return { kind: 'any' }; // a negated empty range: any character
  }
  // The class as the regular expression parser reads it: literal characters, and `-` between two chunks a range.
  type Atom = { ch: string; dash: boolean };
  const atoms: Atom[] = [];
  chunks.forEach((chunk, index) => {
    if (index > 0) {
      atoms.push({ ch: '-', dash: true });
    }
    for (const ch of chunk) {
      atoms.push({ ch, dash: false });
    }
  });
  let negate = false;
  if (atoms.length > 0 && !atoms[0].dash && atoms[0].ch === '!') {
    negate = true;
    atoms.shift();
  }
  const items: ClassItem[] = [];
  for (let i = 0; i < atoms.length; i++) {
    const lo = code(atoms[i].ch);
    if (i + 1 < atoms.length && atoms[i + 1].dash) {
      if (i + 2 >= atoms.length) {
        items.push({ lo, hi: lo }, { lo: code('-'), hi: code('-') });
        break;
      }
      const hi = code(atoms[i + 2].ch);
      if (hi < lo) {
        return undefined; // Python would not compile it (translate never writes one)
      }
      items.push({ lo, hi });
      i += 2;
    } else {
      items.push({ lo, hi: lo });
    }
  }
  return { kind: 'class', negate, items };
}

/** The glob as tokens, or undefined when Python would not compile what fnmatch.translate makes of it. */
function tokens(glob: string): Token[] | undefined {
  const pat = Array.from(glob);
  const n = pat.length;
  const out: Token[] = [];
  let i = 0;
  while (i < n) {
    const c = pat[i];
    i += 1;
    if (c === '*') {
      if (out.length === 0 || out[out.length - 1].kind !== 'star') {
        out.push({ kind: 'star' });
      }
    } else if (c === '?') {
      out.push({ kind: 'any' });
    } else if (c === '[') {
      let j = i;
      if (j < n && pat[j] === '!') {
        j += 1;
      }
      if (j < n && pat[j] === ']') {
        j += 1;
      }
      while (j < n && pat[j] !== ']') {
        j += 1;
      }
      if (j >= n) {
        out.push({ kind: 'char', code: code('[') });
      } else {
        const token = classToken(classChunks(pat, i, j));
        if (!token) {
          return undefined;
        }
        out.push(token);
        i = j + 1;
      }
    } else {
      out.push({ kind: 'char', code: code(c) });
    }
  }
  return out;
}

function matchesOne(token: Token, ch: number): boolean {
  switch (token.kind) {
    case 'any':
      return true;
    case 'char':
      return token.code === ch;
    case 'class':
      return token.items.some((item) => ch >= item.lo && ch <= item.hi) !== token.negate;
    default:
      return false;
  }
}

/** Whether the glob can be used at all (Python compiles what fnmatch.translate makes of it). */
export function globValid(glob: string): boolean {
  return tokens(glob) !== undefined;
}

/** Whether `value` matches `glob` whole, as `re.match(fnmatch.translate(glob), value)` says. */
export function globMatch(glob: string, value: string): boolean {
  const pattern = tokens(glob);
  if (!pattern) {
    return false;
  }
  const text = Array.from(value, code);
  // The classic single-star backtracking: every token but `*` is one character wide.
  let p = 0;
  let s = 0;
  let starP = -1;
  let starS = 0;
  while (s < text.length) {
    const token = pattern[p];
    if (token !== undefined && token.kind === 'star') {
      starP = p;
      starS = s;
      p += 1;
    } else if (token !== undefined && matchesOne(token, text[s])) {
      p += 1;
      s += 1;
    } else if (starP >= 0) {
      p = starP + 1;
      starS += 1;
      s = starS;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p].kind === 'star') {
    p += 1;
  }
  return p === pattern.length;
}

/** A glob that matches exactly `text` (fnmatch has no escape: `*`, `?` and `[` go in a class of their own). */
export function literalGlob(text: string): string {
  return Array.from(text, (c) => (c === '*' || c === '?' || c === '[' ? `[${c}]` : c)).join('');
}
